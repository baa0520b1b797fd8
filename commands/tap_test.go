package commands

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// delegateOne submits a delegate.request of the seeded run's worker (three events: requested, admitted, reserved) and
// requires it admitted.
func (f *engineFixture) delegateOne(id string) Reply {
	f.t.Helper()
	r := f.submit(as(events.WorkerPrincipal("R", "02_exec"), id,
		&DelegateRequest{RunID: "R", TaskID: "02_exec", Prompt: "p", BudgetTokens: ptr(int64(100))}))
	require.Nil(f.t, r.Rejected)
	return r
}

// createTask submits a task.create of the seeded run (one event).
func (f *engineFixture) createTask(id string) Reply {
	return f.do(&TaskCreate{RunID: "R", TaskID: id, Role: "executor", Agent: "a", Title: id, Cwd: "/w"})
}

// TestATapHoldsWhatThePublisherFolded: a tap holds the events published after it was taken, and none before: in log
// order, gapless, each what the log holds at its position (its stream, version, type, command and payload), and each
// there once Changed wakes its readers for it (the publisher's point after that wake, before anyone is answered).
func TestATapHoldsWhatThePublisherFolded(t *testing.T) {
	var tap atomic.Pointer[Tap]
	var heldAtWake []uint64 // the last position the tap held at each group's publish (the publisher's goroutine)
	hooks := &testHooks{commit: func(point commitPoint, group []*pending) error {
		if tp := tap.Load(); tp != nil && point == pointPublished {
			tp.mu.Lock()
			if n := len(tp.evs); n > 0 {
				heldAtWake = append(heldAtWake, tp.evs[n-1].Position)
			}
			tp.mu.Unlock()
		}
		return nil
	}}
	f := openEngineWith(t, vfs.NewMem(), newTestClock(), Options{hooks: hooks})
	f.seedRun("R", 100000)
	from := f.eng.Head() + 1
	tap.Store(f.eng.Tap(1 << 10))
	defer tap.Load().Close()

	var answered []uint64
	for i := range 2 { // NB: the default config holds two delegations in flight
		answered = append(answered, f.delegateOne(fmt.Sprintf("d%d", i)).Position)
		answered = append(answered, f.createTask(fmt.Sprintf("t%d", i)).Position)
	}
	require.Equal(t, answered, heldAtWake, "each command's events were in the tap before it was answered")
	evs := tap.Load().Take(nil)
	require.Len(t, evs, 2*(3+1))
	it := f.log.Read(from)
	defer it.Close()
	for i, got := range evs {
		require.True(t, it.Next(), "the log holds position %d", got.Position)
		want, err := projections.FromLog(it.Event())
		require.NoError(t, err)
		require.Equal(t, from+uint64(i), got.Position)
		require.Equal(t, want.Position, got.Position)
		require.Equal(t, want.Stream, got.Stream)
		require.Equal(t, want.StreamVersion, got.StreamVersion, "at %d", got.Position)
		require.Equal(t, want.Type, got.Type)
		require.Equal(t, want.CommandID, got.CommandID)
		require.Equal(t, want.Time, got.Time)
		wantPayload, err := events.EncodePayload(want.Payload)
		require.NoError(t, err)
		gotPayload, err := events.EncodePayload(got.Payload)
		require.NoError(t, err)
		require.Equal(t, wantPayload, gotPayload, "payload at %d (%s)", got.Position, got.Type)
	}
	require.False(t, it.Next(), "the tap holds every event the log holds past its start")
	require.Empty(t, tap.Load().Take(nil), "a Take empties the tap")
}

// TestATapDropsWhatItsReaderLeftPastItsBound: a tap whose reader falls behind keeps no more than its bound: a group
// that would pass it drops what the tap held, one that passes it alone is not added, and after Close nothing is.
func TestATapDropsWhatItsReaderLeftPastItsBound(t *testing.T) {
	f := openEngine(t, vfs.NewMem(), newTestClock(), nil)
	f.seedRun("R", 100000)
	tap := f.eng.Tap(3)
	defer tap.Close()
	positions := func(evs []events.Event) []uint64 {
		var ps []uint64
		for _, ev := range evs {
			ps = append(ps, ev.Position)
		}
		return ps
	}

	f.createTask("a")
	f.createTask("b")
	c := f.delegateOne("c").Position // three events: the tap would hold five
	require.Equal(t, []uint64{c - 2, c - 1, c}, positions(tap.Take(nil)), "a and b dropped, c's three kept")

	f.createTask("d")
	f.createTask("e")
	f.eng.Tap(0).Close() // NB: another tap, open and closed, changes nothing for this one
	small := f.eng.Tap(2)
	f.delegateOne("f") // three events: past small's bound alone, not added to it; tap drops d and e for them
	require.Empty(t, small.Take(nil))
	g := f.createTask("g").Position
	require.Equal(t, []uint64{g}, positions(small.Take(nil)))
	small.Close()
	h := f.createTask("h").Position
	require.Empty(t, small.Take(nil), "a closed tap takes nothing more")
	require.Equal(t, []uint64{g, h}, positions(tap.Take(nil)), "d and e dropped for f's three, and those for g")
	none := f.eng.Tap(0)
	defer none.Close()
	f.createTask("i")
	require.Empty(t, none.Take(nil), "a tap of bound 0 holds nothing")
}
