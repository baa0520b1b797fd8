package commands

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/projections"
)

// idleEvictions is an engine on guard whose idle writer passes over the ended runs every evictPassEvery of real
// time, keeping them hot for a minute of its clock, with the eviction passes counted as the writer decides them.
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
		Retention: time.Minute, Space: guard, hooks: hooks})
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
		return ie.passes.Load() >= at+2 && !ie.eng.savingViews.Load()
	}, time.Minute, time.Millisecond)
}

// While the disk is below its free-space minimum no view of a run gone cold is written: an eviction pass of the
// idle writer wrote them with no check, though every command was refused, and a write the full disk refuses fails
// the log stop (and crewd with it). Views are derived data: the first pass once space is back writes them.
func TestNoViewOfAColdRunIsWrittenWhileSpaceIsLow(t *testing.T) {
	guard := &spaceGuard{}
	ie := openIdleEvictions(t, vfs.NewMem(), guard)
	endRuns(t, ie.engineFixture, "C", 2)
	saved := ie.eng.cold.ViewsSaved()

	guard.low.Store(true)
	ie.passRetention()
	ie.eng.Read(func(s *projections.State) {
		require.True(t, s.IsCold("C00") && s.IsCold("C01"), "the ended runs went cold")
	})
	require.Equal(t, saved, ie.eng.cold.ViewsSaved(), "a view was written while space was low")
	_, _, err := ie.log.View("C00")
	require.ErrorIs(t, err, eventlog.ErrNotFound)

	guard.low.Store(false)
	ie.passRetention()
	require.Equal(t, saved+2, ie.eng.cold.ViewsSaved(), "the views were not written once space was back")
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
	l, err := eventlog.Open("db", &eventlog.Options{FS: mem})
	require.NoError(t, err)
	e, err = Open(l, Options{Clock: clock.Now, NewID: counterIDs(), ExpiryInterval: -1, SnapshotEvery: -1,
		Retention: -1, Space: guard, hooks: hooks})
	require.NoError(t, err)
	close(opened)
	f = &engineFixture{t: t, fs: mem, log: l, eng: e, clock: clock}
	t.Cleanup(f.close)
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
