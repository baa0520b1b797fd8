package broker

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// TestWaitWakesOnlyForItsTask: a waiter on task P is not woken by commits of P's run that leave P's status alone
// (usage of Q) nor by other runs; it is woken once P moves, and then reads P's new status.
func TestWaitWakesOnlyForItsTask(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.seed()
	f.seedRun("R2", "T2")
	submit := func(c commands.Command) {
		r, err := f.eng.Submit(context.Background(), commands.Request{Actor: events.Actor{Role: events.RoleOrchestrator}, Command: c})
		require.NoError(t, err)
		require.Nil(t, r.Rejected)
	}
	hub := &f.srv.waits
	hub.add(runR, taskP)
	defer hub.release(runR, taskP)
	st, found, changed := hub.current(runR, taskP)
	require.True(t, found)
	require.Equal(t, projections.TaskRunning, st)
	for i := 0; i < 20; i++ {
		submit(&commands.TaskUsage{RunID: runR, TaskID: taskQ, Input: 1, Output: 1})
		submit(&commands.TaskUsage{RunID: "R2", TaskID: "T2", Input: 1, Output: 1})
	}
	submit(&commands.TaskTransition{RunID: runR, TaskID: taskP, To: "completed"})
	<-changed
	st, _, _ = hub.current(runR, taskP)
	require.Equal(t, projections.TaskCompleted, st)
	require.Equal(t, int64(1), hub.woken.Load(), "only P's own transition woke P's waiters")
}
