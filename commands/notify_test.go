package commands

import (
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/projections"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestRunChangedWakesOnlyThatRun: a commit of run B leaves run A's channel open; a commit of run A closes it, and
// the state a woken reader sees holds the commit.
func TestRunChangedWakesOnlyThatRun(t *testing.T) {
	f := openEngine(t, vfs.NewMem(), newTestClock(), nil)
	f.seedRun("A", 0)
	f.seedRun("B", 0)
	a, leaveA := f.eng.RunChanged("A")
	defer leaveA()
	b, leaveB := f.eng.RunChanged("B")
	defer leaveB()
	all := f.eng.Changed()
	f.do(&TaskUsage{RunID: "B", TaskID: "02_exec", Input: 1, Output: 1})
	require.True(t, closed(all), "Changed wakes at every publish")
	require.True(t, closed(b))
	require.False(t, closed(a), "a commit of B does not wake A's followers")
	f.do(&TaskUsage{RunID: "A", TaskID: "02_exec", Input: 7, Output: 1})
	require.True(t, closed(a))
	var input int64
	f.eng.Read(func(st *projections.State) {
		task, _ := st.Task("A", "02_exec")
		input = task.Usage.Input
	})
	require.Equal(t, int64(7), input, "the publish that woke A carries A's event")
	fresh, leave := f.eng.RunChanged("A")
	defer leave()
	require.False(t, closed(fresh), "a fresh channel waits for the next commit")
}

// TestRunChangedOfAColdRunIsForgotten: a channel a follower took of a run that ended, and then left (a closed
// connection, a wait follower's last pass), is closed and forgotten when the run leaves memory after its retention:
// an ended run may never publish again, and the engine would keep one channel per such run for good.
func TestRunChangedOfAColdRunIsForgotten(t *testing.T) {
	fs := vfs.NewMem()
	clock := newTestClock()
	l, err := eventlog.Open("db", &eventlog.Options{FS: fs})
	require.NoError(t, err)
	defer l.Close()
	e, err := Open(l, Options{Clock: clock.Now, NewID: counterIDs(), ExpiryInterval: -1, SnapshotEvery: -1,
		Retention: time.Second})
	require.NoError(t, err)
	defer e.Close()
	f := &engineFixture{t: t, fs: fs, log: l, eng: e, clock: clock}
	const runs = 20
	var waiting []<-chan struct{}
	for i := range runs {
		id := fmt.Sprintf("N%03d", i)
		f.seedRun(id, 0)
		f.do(&RunTransition{RunID: id, To: "completed"})
		ch, _ := e.RunChanged(id) // NB: never left: the follower still waits when its run goes cold
		waiting = append(waiting, ch)
	}
	clock.Advance(2 * time.Second)
	f.seedRun("LAST", 0) // its commit runs an eviction pass: the ended runs go cold
	e.Read(func(s *projections.State) { require.True(t, s.IsCold("N000")) })
	for i, ch := range waiting {
		require.True(t, closed(ch), "run %d: a follower still waiting is woken when its run goes cold", i)
	}
	require.Zero(t, e.RunSignals(), "channels of cold runs held by the engine")
}

// TestRunChangedLeftByItsFollowersIsForgotten: a channel taken of a run that is cold or unknown, which publishes
// nothing, is forgotten once every follower that took it has left, not kept until the run's next publish: followers
// of runs ended long ago (an orchestrator subscribing to its finished run, the admin to any run id) would otherwise
// leave one channel per run behind for good, growing with the history. A follower still waiting keeps it.
func TestRunChangedLeftByItsFollowersIsForgotten(t *testing.T) {
	f := openColdEngine(t, Options{SnapshotEvery: -1, Retention: -1})
	e := f.eng
	endRuns(t, f, "C", 3)
	require.Nil(t, f.submitAs(admin, &RunCreate{RunID: "N", Team: "t", Goal: "g", Cwd: "/w"}).Rejected)
	e.Read(func(s *projections.State) { require.True(t, s.IsCold("C02")) })
	for i := range 50 {
		for _, id := range []string{"C00", "C01", "C02", fmt.Sprintf("unknown-%d", i)} {
			_, leave := e.RunChanged(id)
			_, leave2 := e.RunChanged(id)
			leave()
			leave2()
		}
	}
	require.Zero(t, e.RunSignals(), "channels of runs nobody follows any more")

	held, leave := e.RunChanged("N")
	_, leaveOther := e.RunChanged("N")
	leaveOther()
	require.Equal(t, 1, e.RunSignals(), "a follower still waiting keeps its run's channel")
	require.Nil(t, f.submitAs(orchestrator, &RunTransition{RunID: "N", To: "running"}).Rejected)
	require.True(t, closed(held), "a follower still waiting is woken by its run's publish")
	leave() // after the publish that closed it: the channel taken since is not this one's to forget
	again, leaveAgain := e.RunChanged("N")
	_, leaveLate := e.RunChanged("N")
	leaveLate()
	require.Equal(t, 1, e.RunSignals())
	require.Nil(t, f.submitAs(orchestrator, &RunTransition{RunID: "N", To: "completed"}).Rejected)
	require.True(t, closed(again))
	leaveAgain()
	require.Zero(t, e.RunSignals())
}
