package commands

import (
	"context"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// idleEvictions is an engine on guard whose idle writer passes over the ended runs every evictPassEvery of real
// time, keeping them hot for a minute of its clock, with the eviction passes counted as the writer decides them.
// Its cache of cold runs holds one run, so a query of any but the last run gone cold reads it back from the log.
type idleEvictions struct {
	*engineFixture
	passes atomic.Int32
}

// openIdleEvictions opens an idleEvictions on a new store in fs. NB: no expiry ticks (an hour apart): while space is
// low the eviction passes of the idle writer are all that runs.
func openIdleEvictions(t *testing.T, fs vfs.FS, guard SpaceGuard) *idleEvictions {
	t.Helper()
	ie := &idleEvictions{}
	hooks := &testHooks{missingViewsDecided: func(bool, bool) { ie.passes.Add(1) }}
	l, err := eventlog.Open("db", &eventlog.Options{FS: fs})
	require.NoError(t, err)
	clock := newTestClock()
	e, err := Open(l, Options{Clock: clock.Now, NewID: counterIDs(), ExpiryInterval: time.Hour, SnapshotEvery: -1,
		Retention: time.Minute, ColdCache: 1, Space: guard, hooks: hooks})
	require.NoError(t, err)
	ie.engineFixture = &engineFixture{t: t, fs: fs, log: l, eng: e, clock: clock}
	t.Cleanup(ie.close)
	return ie
}

// passRetention moves the clock past the retention and waits for two eviction passes of the idle writer, so that
// one began after the move, and for the background pass of the views it may have started. NB: the clock moves on by
// evictPassEvery at each look, as a pass plans the next one evictPassEvery of the engine's time ahead.
func (ie *idleEvictions) passRetention() {
	ie.t.Helper()
	ie.clock.Advance(2 * time.Minute)
	at := ie.passes.Load()
	require.Eventually(ie.t, func() bool {
		ie.clock.Advance(evictPassEvery)
		select {
		case <-ie.eng.Failed(): // a stopped writer passes no more: the caller's checks say what failed
			return true
		default:
		}
		return ie.passes.Load() >= at+2 && !ie.eng.savingViews.Load()
	}, time.Minute, time.Millisecond)
}

// coldWhileSpaceIsLow opens an idleEvictions on guard, ends runs C00 and C01, and makes them cold in an eviction pass
// while the disk is below its minimum.
func coldWhileSpaceIsLow(t *testing.T, fs vfs.FS, guard *spaceGuard) *idleEvictions {
	t.Helper()
	ie := openIdleEvictions(t, fs, guard)
	endRuns(t, ie.engineFixture, "C", 2)
	guard.low.Store(true)
	ie.passRetention()
	ie.eng.Read(func(s *projections.State) {
		require.True(t, s.IsCold("C00") && s.IsCold("C01"), "the ended runs went cold")
	})
	return ie
}

// While the disk is below its free-space minimum no view of a run gone cold is written: an eviction pass of the
// idle writer wrote them with no check, though every command was refused, and a write the full disk refuses fails
// the log stop (and crewd with it). Views are derived data: the first pass once space is back writes them.
func TestNoViewOfAColdRunIsWrittenWhileSpaceIsLow(t *testing.T) {
	guard := &spaceGuard{}
	ie := coldWhileSpaceIsLow(t, vfs.NewMem(), guard)
	require.Zero(t, ie.eng.cold.ViewsSaved(), "a view was written while space was low")
	_, _, err := ie.log.View("C00")
	require.ErrorIs(t, err, eventlog.ErrNotFound)

	guard.low.Store(false)
	ie.passRetention()
	require.EqualValues(t, 2, ie.eng.cold.ViewsSaved(), "the views were not written once space was back")
	_, _, err = ie.log.View("C00")
	require.NoError(t, err)
}

// A pass of the missing views of cold runs (here the one at Open, on a store whose cold runs have none) stops once
// the disk is below its free-space minimum, where it re-folded and wrote every run it had left; it is not a failed
// pass, which would put the next off (putOffMissingViews): the first eviction pass once space is back writes them.
func TestThePassOfTheMissingViewsStopsWhileSpaceIsLow(t *testing.T) {
	mem, clock := vfs.NewMem(), newTestClock()
	f := openEngineWith(t, mem, clock, Options{SnapshotEvery: -1, Retention: -1, NoViews: true})
	endMoreRunsThanViewsQueue(t, f.eng, clock)
	f.close()

	guard := &spaceGuard{}
	var started atomic.Int32
	var missing, saved int64 // when the pass at Open started
	var e *Engine
	opened := make(chan struct{})
	hooks := &testHooks{missingViews: func() {
		<-opened // NB: the pass may start before Open returns e
		if started.Add(1) == 1 {
			missing, saved = int64(e.cold.ViewsMissing()), e.cold.ViewsSaved()
			guard.low.Store(true) // the disk fills up as the pass starts
		}
	}}
	f = openEngineWith(t, mem, clock, Options{SnapshotEvery: -1, Retention: -1, Space: guard, hooks: hooks})
	e = f.eng
	close(opened)
	require.Eventually(t, func() bool { return started.Load() == 1 && !e.savingViews.Load() }, time.Minute,
		time.Millisecond, "the pass at Open")
	require.Positive(t, missing)
	require.Equal(t, saved, e.cold.ViewsSaved(), "a missing view was written while space was low")
	require.EqualValues(t, missing, e.cold.ViewsMissing())
	require.Zero(t, e.missingViewsWait.Load(), "the pass stopped by low space put the next one off")

	guard.low.Store(false)
	require.Nil(t, f.submitAs(admin, &RunCreate{RunID: "N", Team: "t", Goal: "g", Cwd: "/w"}).Rejected)
	require.Eventually(t, func() bool { return started.Load() == 2 && !e.savingViews.Load() }, time.Minute,
		time.Millisecond, "the first eviction pass once space is back")
	require.Zero(t, e.cold.ViewsMissing(), "the pass once space was back wrote every missing view")
}

// While the disk is below its free-space minimum no summary of a run gone cold is written to the index: the writer's
// eviction pass wrote them with no check. The summaries stay in memory, where the runs are answered from, and the
// first eviction pass once space is back writes them.
func TestNoSummaryOfAColdRunIsWrittenWhileSpaceIsLow(t *testing.T) {
	guard := &spaceGuard{}
	ie := coldWhileSpaceIsLow(t, vfs.NewMem(), guard)
	for _, run := range []string{"C00", "C01"} {
		_, err := ie.log.LatestSummary(run, ie.eng.Head())
		require.ErrorIs(t, err, eventlog.ErrNotFound, "%s: a summary was written while space was low", run)
	}
	ie.eng.Read(func(s *projections.State) { require.Equal(t, 2, s.ColdInMemory()) })
	require.Zero(t, ie.eng.cold.IndexWriteErrors(), "a summary held back is not a failed write")

	guard.low.Store(false)
	ie.passRetention()
	for _, run := range []string{"C00", "C01"} {
		_, err := ie.log.LatestSummary(run, ie.eng.Head())
		require.NoError(t, err, "%s: the summary was not written once space was back", run)
	}
	ie.eng.Read(func(s *projections.State) { require.Zero(t, s.ColdInMemory()) })
}

// A query of a cold run with no view written reads it back from the log and, while the disk is below its free-space
// minimum, writes no view of it: a read wrote one with no check, and a write the full disk refuses fails the log
// stop. The run is answered all the same, and its view is written once space is back.
func TestAColdRunReadBackWhileSpaceIsLowWritesNoView(t *testing.T) {
	guard := &spaceGuard{}
	ie := coldWhileSpaceIsLow(t, vfs.NewMem(), guard)
	n, err := ie.eng.Warm("C00")
	require.NoError(t, err)
	require.Positive(t, n, "the run was re-folded")
	ie.eng.Read(func(s *projections.State) {
		r, ok := s.Run("C00")
		require.True(t, ok)
		require.Equal(t, "completed", string(r.Status))
	})
	require.Zero(t, ie.eng.cold.ViewsSaved(), "a view was written while space was low")
	_, _, err = ie.log.View("C00")
	require.ErrorIs(t, err, eventlog.ErrNotFound)

	guard.low.Store(false)
	ie.passRetention()
	_, _, err = ie.log.View("C00")
	require.NoError(t, err, "the view was not written once space was back")
}

// fullDisk is a disk that fills up: while on, every write and file creation of the store fails with ENOSPC, and its
// guard reports the space below the minimum.
type fullDisk struct {
	errorfs.Toggle
	spaceGuard
}

func newFullDisk() *fullDisk {
	d := &fullDisk{}
	d.Injector = errorfs.InjectorFunc(func(op errorfs.Op) error {
		switch op.Kind {
		case errorfs.OpCreate, errorfs.OpReuseForWrite, errorfs.OpFilePreallocate, errorfs.OpFileWrite,
			errorfs.OpFileWriteAt:
			return &os.PathError{Op: "write", Path: op.Path, Err: syscall.ENOSPC}
		}
		return nil
	})
	return d
}

func (d *fullDisk) fill(full bool) {
	d.low.Store(full)
	if full {
		d.On()
	} else {
		d.Off()
	}
}

// An engine on a full disk, every command refused disk-full, stays up while its ended runs go cold and a query
// reads one back: nothing writes to the store, where a view or a summary the disk refused failed the log stop, and
// the engine with it, so that crewd exited though every command had been refused as it should. Once space is back
// the views and summaries are written, and commands decided.
func TestAnEngineWhoseCommandsAreRefusedOnAFullDiskStaysUp(t *testing.T) {
	disk := newFullDisk()
	ie := openIdleEvictions(t, errorfs.Wrap(vfs.NewMem(), disk), &disk.spaceGuard)
	endRuns(t, ie.engineFixture, "C", 2)

	disk.fill(true)
	next := Request{Principal: events.AdminPrincipal(), CommandID: "create-N", Actor: admin,
		Command: &RunCreate{RunID: "N", Team: "t", Goal: "g", Cwd: "/w"}}
	_, err := ie.eng.Submit(context.Background(), next)
	require.ErrorIs(t, err, ErrNoSpace)
	ie.passRetention()
	_, err = ie.eng.Warm("C00")
	require.NoError(t, err)
	select {
	case <-ie.eng.Failed():
		t.Fatalf("the engine stopped on the full disk: %v", ie.eng.Err())
	default:
	}
	require.NoError(t, ie.log.Err())
	ie.eng.Read(func(s *projections.State) {
		require.True(t, s.IsCold("C00") && s.IsCold("C01"), "the ended runs went cold")
	})

	disk.fill(false)
	ie.passRetention()
	for _, run := range []string{"C00", "C01"} {
		_, _, err := ie.log.View(run)
		require.NoError(t, err, "%s: no view once space was back", run)
		_, err = ie.log.LatestSummary(run, ie.eng.Head())
		require.NoError(t, err, "%s: no summary once space was back", run)
	}
	r, err := ie.eng.Submit(context.Background(), next)
	require.NoError(t, err)
	require.Nil(t, r.Rejected)
	require.False(t, r.Replayed, "the refusal was recorded")
}
