package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

func TestSnapshotDue(t *testing.T) {
	const every = 100
	for _, c := range []struct {
		name string
		last snapshotMark
		head uint64
		cold int
		want bool
	}{
		{"empty log", snapshotMark{}, 0, 0, false},
		{"no snapshot, before every", snapshotMark{}, every - 1, 0, false},
		{"no snapshot, at every", snapshotMark{}, every, 0, true},
		{"small snapshot, every events after it", snapshotMark{Position: 500, Records: 10}, 500 + every, 0, true},
		{"small snapshot, one event short of every", snapshotMark{Position: 500, Records: 10},
			500 + every - 1, 0, false},
		{"large snapshot, every events after it", snapshotMark{Position: 500, Records: 1000}, 500 + every, 0, false},
		{"large snapshot, one event short of k = 2 times it", snapshotMark{Position: 500, Records: 1000},
			500 + 2*1000 - 1, 0, false},
		{"large snapshot, k = 2 times it after it", snapshotMark{Position: 500, Records: 1000},
			500 + 2*1000, 0, true},
		{"large snapshot, 64 runs went cold", snapshotMark{Position: 500, Records: 1000}, 501, 64, true},
		{"one run short of the cold trigger", snapshotMark{Position: 500, Records: 1000}, 501, 63, false},
		{"no snapshot, 64 runs went cold at once", snapshotMark{}, 1, 64, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, snapshotDue(c.last, c.head, c.cold, every))
		})
	}
	t.Run("disabled", func(t *testing.T) {
		require.False(t, snapshotDue(snapshotMark{}, 1<<40, snapshotAfterCold, -1))
	})
	t.Run("default every", func(t *testing.T) {
		require.Equal(t, uint64(DefaultSnapshotEvery), NextSnapshotAt(0, 0, 0))
		require.Equal(t, uint64(7+2*DefaultSnapshotEvery), NextSnapshotAt(7, DefaultSnapshotEvery, 0))
	})
}

// snapshotRecorder records every snapshot the engine saves with its size
// in records, read back from the log (the observer runs before the next
// snapshot may start).
type snapshotRecorder struct {
	log *eventlog.Log
	// head is the head after the last group reported: Committed runs after
	// the group is published, so after the publisher decided on a snapshot.
	head atomic.Uint64
	mu   sync.Mutex
	pos  []uint64
	recs []int64
	errs []error
}

func (r *snapshotRecorder) Committed(g *GroupReport) { r.head.Store(g.Head) }

func (r *snapshotRecorder) Snapshotted(position uint64, _ int, _ time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	snap, err := r.log.LatestSnapshot()
	if err == nil && snap.Position != position {
		err = fmt.Errorf("latest snapshot at %d, told %d", snap.Position, position)
	}
	var s *projections.State
	if err == nil {
		s, err = projections.DecodeSnapshot(snap.Data)
	}
	if err != nil {
		r.errs = append(r.errs, err)
		return
	}
	r.pos, r.recs = append(r.pos, position), append(r.recs, s.SnapshotRecords())
}

// delegateAndSettle has 02_exec of run delegate n times, each delegation
// settled before the next: every one stays in the run, so the hot state
// grows with the events.
func delegateAndSettle(t *testing.T, f *engineFixture, run string, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		r, err := f.eng.Submit(context.Background(),
			Request{Principal: events.WorkerPrincipal(run, "02_exec"), CommandID: fmt.Sprintf("d-%d", i),
				Actor: worker("02_exec"), Command: &DelegateRequest{RunID: run, TaskID: "02_exec", Prompt: "find X",
					BudgetTokens: ptr(int64(10))}})
		require.NoError(t, err)
		require.Nil(t, r.Rejected)
		var res DelegateResult
		require.NoError(t, json.Unmarshal(r.Result, &res))
		f.do(&DelegateSettle{RunID: run, SubID: res.GrandchildTaskRef, Outcome: OutcomeOK, Text: "done"})
	}
}

// delegateWaitingForEachSnapshot has run R delegate and settle n times,
// waiting after each for the snapshot it made due, if any, to be saved.
// NB: a snapshot taken while the writer goes on is seldom due again before
// it ends on a loaded machine (every decision then skips it), which hides
// the policy: wait for each one, as on an idle core. The group is reported
// after the publisher decided on a snapshot; Submit may return before that.
func delegateWaitingForEachSnapshot(t *testing.T, f *engineFixture, rec *snapshotRecorder, n int) {
	t.Helper()
	for i := range n {
		delegateAndSettle(t, f, "R", i, 1)
		head, _ := f.log.Head()
		for rec.head.Load() < head || f.eng.snapping.Load() {
			runtime.Gosched()
		}
	}
}

// With a hot state that grows with the events, the snapshots' total work
// stays proportional to the events written: every snapshot but the last
// was followed by at least k × its records of events, so the records
// encoded over all snapshots but the last are at most events/k (taken
// every SnapshotEvery events, they would grow with the square of the
// events).
func TestEngineSnapshotWorkIsAmortisedOverTheEvents(t *testing.T) {
	fs := vfs.NewMem()
	clock := newTestClock()
	l, err := eventlog.Open("db", &eventlog.Options{FS: fs})
	require.NoError(t, err)
	defer l.Close()
	rec := &snapshotRecorder{log: l}
	e, err := Open(l, Options{Clock: clock.Now, NewID: counterIDs(), ExpiryInterval: -1, SnapshotEvery: 50,
		Observer: rec})
	require.NoError(t, err)
	f := &engineFixture{t: t, fs: fs, log: l, eng: e, clock: clock}
	f.seedRun("R", 1<<40)
	delegateWaitingForEachSnapshot(t, f, rec, 600)
	require.NoError(t, e.Close()) // waits for the background snapshot
	head, _ := l.Head()

	require.Empty(t, rec.errs)
	t.Logf("snapshots at %v of %v records, head %d", rec.pos, rec.recs, head)
	require.GreaterOrEqual(t, len(rec.pos), 3, "snapshots taken")
	var encoded int64
	for _, n := range rec.recs[:len(rec.recs)-1] {
		encoded += n
	}
	require.LessOrEqual(t, encoded, int64(head)/snapshotGrowth,
		"records encoded by the snapshots but the last (%v at %v), over %d events", rec.recs, rec.pos, head)
	require.Greater(t, rec.recs[len(rec.recs)-1], int64(50), "the hot state outgrew SnapshotEvery")
}

// restartable returns a function that opens the log and an engine
// snapshotting every `every` events on one in-memory file system, with one
// clock and one id counter across the restarts (ids stay unique).
func restartable(t *testing.T, every int64) func() (*eventlog.Log, *engineFixture) {
	fs := vfs.NewMem()
	clock := newTestClock()
	ids := counterIDs()
	return func() (*eventlog.Log, *engineFixture) {
		l, err := eventlog.Open("db", &eventlog.Options{FS: fs})
		require.NoError(t, err)
		e, err := Open(l, Options{Clock: clock.Now, NewID: ids, ExpiryInterval: -1, SnapshotEvery: every})
		require.NoError(t, err)
		return l, &engineFixture{t: t, fs: fs, log: l, eng: e, clock: clock}
	}
}

// Start-up after the longest tail the policy leaves (just short of k × the
// snapshot's records after it, more than SnapshotEvery) reads the snapshot
// and folds the tail into the state a fold from position 1 gives, and the
// tail it folds is within the (1 + k) bound doc.go states.
func TestEngineRestartsAfterTheLongestTail(t *testing.T) {
	const every = 50
	open := restartable(t, every)
	l, f := open()
	f.seedRun("R", 1<<40)
	delegateAndSettle(t, f, "R", 0, 100)
	require.NoError(t, f.eng.Close()) // waits for the background snapshot
	require.NoError(t, l.Close())

	l, f = open()
	info := f.eng.LoadInfo()
	require.Greater(t, snapshotGrowth*info.SnapshotRecords, int64(every), "a snapshot larger than SnapshotEvery")
	due := NextSnapshotAt(info.SnapshotPosition, info.SnapshotRecords, every)
	const cycleEvents = 16 // more than one delegation and its settlement write
	n := 100
	for head, _ := l.Head(); head+cycleEvents < due; head, _ = l.Head() {
		delegateAndSettle(t, f, "R", n, 1)
		n++
	}
	var want *projections.State
	f.eng.Read(func(s *projections.State) { want = whole(t, s) })
	require.NoError(t, f.eng.Close())
	head, _ := l.Head()
	snap, err := l.LatestSnapshot()
	require.NoError(t, err)
	require.Equal(t, info.SnapshotPosition, snap.Position, "no snapshot before k × the last one's records")
	require.NoError(t, l.Close())

	l, f = open()
	defer f.close()
	info = f.eng.LoadInfo()
	require.Equal(t, snap.Position, info.SnapshotPosition)
	require.Equal(t, head-snap.Position, info.Replayed)
	require.Greater(t, info.Replayed, uint64(every), "a tail longer than SnapshotEvery")
	require.LessOrEqual(t, info.Replayed, uint64(snapshotGrowth*info.SnapshotRecords),
		"the tail within k × the snapshot")
	f.eng.Read(func(s *projections.State) { require.Equal(t, want, whole(t, s)) })
	full := projections.New()
	require.NoError(t, projections.Replay(full, l, 0))
	require.Equal(t, want, full, "snapshot + tail == fold from position 1")
}

// A snapshot that came due while the one before was saved, with no group
// published after it, is taken by Close: the next start folds no tail
// beyond the policy's bound (here: none), however long the writer ran
// while the one before was in flight.
func TestEngineCloseTakesTheSnapshotThatCameDueInFlight(t *testing.T) {
	const every = 50
	open := restartable(t, every)
	l, f := open()
	f.seedRun("R", 1<<40)
	// NB: a snapshot held in flight (as a slow save would) while the
	// writer passes several due points: maybeSnapshot starts none.
	require.True(t, f.eng.snapping.CompareAndSwap(false, true))
	delegateAndSettle(t, f, "R", 0, 40)
	head, _ := l.Head()
	require.Greater(t, head, uint64(3*every), "the writer passed the due point while one was in flight")
	f.eng.snapping.Store(false) // the save in flight ends; no group follows
	require.NoError(t, f.eng.Close())
	snap, err := l.LatestSnapshot()
	require.NoError(t, err)
	require.Equal(t, head, snap.Position, "Close took the snapshot that came due")
	require.NoError(t, l.Close())

	_, f = open()
	defer f.close()
	info := f.eng.LoadInfo()
	require.Equal(t, head, info.SnapshotPosition)
	require.Zero(t, info.Replayed)
}

// A stop before the next snapshot is due saves none: Close does not turn
// every stop into a snapshot.
func TestEngineCloseTakesNoSnapshotBeforeItIsDue(t *testing.T) {
	fs := vfs.NewMem()
	l, err := eventlog.Open("db", &eventlog.Options{FS: fs})
	require.NoError(t, err)
	defer l.Close()
	clock := newTestClock()
	e, err := Open(l, Options{Clock: clock.Now, NewID: counterIDs(), ExpiryInterval: -1, SnapshotEvery: 1 << 20})
	require.NoError(t, err)
	f := &engineFixture{t: t, fs: fs, log: l, eng: e, clock: clock}
	f.seedRun("R", 1<<40)
	delegateAndSettle(t, f, "R", 0, 3)
	require.NoError(t, e.Close())
	_, err = l.LatestSnapshot()
	require.ErrorIs(t, err, eventlog.ErrNotFound)
}

// startRecorder is a snapshotRecorder that is also told when each snapshot
// starts, and records the newest snapshot the log held then.
type startRecorder struct {
	snapshotRecorder
	starts []uint64 // the latest snapshot's position at each start (0: none)
}

func (r *startRecorder) SnapshotStarting() {
	r.mu.Lock()
	defer r.mu.Unlock()
	snap, err := r.log.LatestSnapshot()
	switch {
	case errors.Is(err, eventlog.ErrNotFound):
		r.starts = append(r.starts, 0)
	case err != nil:
		r.errs = append(r.errs, err)
	default:
		r.starts = append(r.starts, snap.Position)
	}
}

// An observer that is a SnapshotStarter is told of every snapshot before it
// is saved (crewd returns freed memory then, before the copy and the
// encoding): once per snapshot, each time while the log still holds the
// snapshot before it.
func TestEngineTellsTheObserverASnapshotStarts(t *testing.T) {
	fs := vfs.NewMem()
	l, err := eventlog.Open("db", &eventlog.Options{FS: fs})
	require.NoError(t, err)
	defer l.Close()
	rec := &startRecorder{snapshotRecorder: snapshotRecorder{log: l}}
	clock := newTestClock()
	e, err := Open(l, Options{Clock: clock.Now, NewID: counterIDs(), ExpiryInterval: -1, SnapshotEvery: 50,
		Observer: rec})
	require.NoError(t, err)
	f := &engineFixture{t: t, fs: fs, log: l, eng: e, clock: clock}
	f.seedRun("R", 1<<40)
	delegateWaitingForEachSnapshot(t, f, &rec.snapshotRecorder, 60)
	require.NoError(t, e.Close())

	require.Empty(t, rec.errs)
	require.GreaterOrEqual(t, len(rec.pos), 2, "snapshots taken")
	require.Len(t, rec.starts, len(rec.pos), "one start per snapshot saved")
	want := append([]uint64{0}, rec.pos[:len(rec.pos)-1]...)
	require.Equal(t, want, rec.starts, "each start told before its snapshot was saved")
}

// While the disk has too little free space no snapshot is saved, in the
// background or at Close: the space the guard keeps is the log's. Once space
// is back, the next one due is saved.
func TestEngineSavesNoSnapshotWhileSpaceIsLow(t *testing.T) {
	guard := &spaceGuard{}
	l, e, opts := engineWithSnapshotDue(t, guard)
	guard.low.Store(true)
	// NB: asked while snapping is still held, so the publisher, which may still be landing the last group, cannot
	// mark a snapshot meanwhile, and under the read lock, which the publisher takes to change the published head.
	due := false
	e.Read(func(*projections.State) { due = e.snapshotDueNow() })
	require.True(t, due)
	e.snapping.Store(false)
	require.NoError(t, e.Close())
	_, err := l.LatestSnapshot()
	require.ErrorIs(t, err, eventlog.ErrNotFound, "no snapshot was saved while space was low")

	guard.low.Store(false)
	e, err = Open(l, opts)
	require.NoError(t, err)
	require.NoError(t, e.Close())
	snap, err := l.LatestSnapshot()
	require.NoError(t, err, "with space back, the snapshot due is saved")
	head, _ := l.Head()
	require.Equal(t, head, snap.Position)
}

// engineWithSnapshotDue opens an engine with space as its guard on a new store (closed when the test ends), and
// makes a snapshot due with none saved: it returns holding snapping, so none is saved until the caller clears it, and
// the options it opened the engine with.
func engineWithSnapshotDue(t *testing.T, space SpaceGuard) (*eventlog.Log, *Engine, Options) {
	t.Helper()
	fs := vfs.NewMem()
	l, err := eventlog.Open("db", &eventlog.Options{FS: fs})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	clock := newTestClock()
	opts := Options{Clock: clock.Now, NewID: counterIDs(), ExpiryInterval: -1, SnapshotEvery: 50, Space: space}
	e, err := Open(l, opts)
	require.NoError(t, err)
	f := &engineFixture{t: t, fs: fs, log: l, eng: e, clock: clock}
	f.seedRun("R", 1<<40)
	require.True(t, e.snapping.CompareAndSwap(false, true), "no snapshot in the background while the writer runs")
	delegateAndSettle(t, f, "R", 0, 40)
	return l, e, opts
}

// TestEngineSnapshotsWhileGroupsArePublished: snapshots taken while other
// goroutines' commands change the records they copy (tasks created, started
// and completed in runs of their own) hold the state at their position: a
// restart from the newest one and its tail answers as the fold from
// position 1. Under the race detector it also shows that the snapshot's copy
// shares nothing the publisher writes to.
func TestEngineSnapshotsWhileGroupsArePublished(t *testing.T) {
	fs := vfs.NewMem()
	clock := newTestClock()
	l, err := eventlog.Open("db", &eventlog.Options{FS: fs})
	require.NoError(t, err)
	snaps := &snapshotCounter{first: make(chan struct{})}
	e, err := Open(l, Options{Clock: clock.Now, NewID: counterIDs(), SnapshotEvery: 25, ExpiryInterval: -1,
		Observer: snaps})
	require.NoError(t, err)
	submit := func(c Command) error {
		r, err := e.Submit(context.Background(), Request{Actor: orchestrator, Command: c})
		if err == nil && r.Rejected != nil {
			err = fmt.Errorf("%s rejected: %s", c.Kind(), r.Rejected.Message)
		}
		return err
	}
	runTasks := func(run string) error {
		err := errors.Join(submit(&RunCreate{RunID: run, Team: "t", Goal: "g", Cwd: "/w"}),
			submit(&RunTransition{RunID: run, To: "running"}))
		for i := 0; err == nil && i < 40; i++ {
			if run == "R0" && i == 39 {
				// NB: one run's last task waits for a snapshot saved: a snapshot is taken while the commands run,
				// however slowly the background saves it.
				select {
				case <-snaps.first:
				case <-time.After(time.Minute):
					return errors.New("no snapshot saved while the commands ran")
				}
			}
			task := fmt.Sprintf("%02d_step", i)
			err = errors.Join(
				submit(&TaskCreate{RunID: run, TaskID: task, Role: "executor", Agent: "a", Title: "t", Cwd: "/w",
					StepID: "s"}),
				submit(&TaskTransition{RunID: run, TaskID: task, To: "running"}),
				submit(&TaskTransition{RunID: run, TaskID: task, To: "completed"}))
		}
		return err
	}
	errs := make(chan error, 4)
	for w := range 4 {
		go func() { errs <- runTasks(fmt.Sprintf("R%d", w)) }()
	}
	for range 4 {
		require.NoError(t, <-errs)
	}
	// NB: at least one, not more: each is saved in the background and the next is not started while one is saved,
	// so how many a loaded machine takes in the run varies (it took two where the bound was four); R0 waited for one.
	require.Greater(t, snaps.n.Load(), int64(0), "snapshots were taken while the commands ran")
	var want *projections.State
	e.Read(func(s *projections.State) { want = whole(t, s) })
	require.NoError(t, e.Close())
	require.NoError(t, l.Close())

	l, err = eventlog.Open("db", &eventlog.Options{FS: fs})
	require.NoError(t, err)
	defer l.Close()
	e, err = Open(l, Options{Clock: clock.Now, ExpiryInterval: -1})
	require.NoError(t, err)
	defer e.Close()
	require.NotZero(t, e.LoadInfo().SnapshotPosition)
	e.Read(func(s *projections.State) { require.Equal(t, want, whole(t, s)) })
	full := projections.New()
	require.NoError(t, projections.Replay(full, l, 0))
	require.Equal(t, want, full, "snapshot + tail == fold from position 1")
}

// snapshotCounter is an Observer that counts the snapshots saved.
type snapshotCounter struct {
	n     atomic.Int64
	first chan struct{} // closed at the first snapshot when not nil
	once  sync.Once
}

func (c *snapshotCounter) Committed(*GroupReport) {}
func (c *snapshotCounter) Snapshotted(uint64, int, time.Time) {
	c.n.Add(1)
	if c.first != nil {
		c.once.Do(func() { close(c.first) })
	}
}
