package broker

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
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
	recv(t, changed, "wake of P's waiters by its transition")
	st, _, _ = hub.current(runR, taskP)
	require.Equal(t, projections.TaskCompleted, st)
	require.Equal(t, int64(1), hub.woken.Load(), "only P's own transition woke P's waiters")
}

// TestWaitStatusNeverAnswersAStatusTheTaskHasLeft: a wait sent after its task's transition was answered is never
// answered with the status the task had before it, however far behind the run's follower is: here a worker's 64
// waits on other tasks slow it, while the orchestrator moves Q back and forth and at once waits, with no time, for
// the status Q just left.
func TestWaitStatusNeverAnswersAStatusTheTaskHasLeft(t *testing.T) {
	f := newFixture(t, fixtureOpts{}) // the default limits
	s := f.seed()
	o := f.dialOrchestrator(s)
	const filler = DefaultMaxWaitsPerCredential - 1
	for i := range filler {
		id := fmt.Sprintf("F%04d", i)
		o.ok("task.create", map[string]any{"taskId": id, "role": "explorer", "agent": "a", "title": id, "cwd": "/w", "stepId": id})
	}
	var waiter *client
	for i := range filler + 1 {
		if i%DefaultMaxWaitsPerConn == 0 {
			waiter = f.dial()
			waiter.hello(runR, taskP, s.p)
		}
		task := fmt.Sprintf("F%04d", i)
		if i == filler {
			task = taskQ
		}
		waiter.sendLine(fmt.Sprintf(`{"id":"w%d","method":"task.waitStatus","params":{"taskId":"%s","until":"completed","timeoutMs":60000}}`, i, task))
		if i%DefaultMaxWaitsPerConn == DefaultMaxWaitsPerConn-1 {
			waiter.ok("ping", nil) // the connection's waits are registered before the next one's
		}
	}
	q := f.dial()
	q.hello(runR, "orchestrator", s.orch)
	stale := 0
	for i := range 1000 {
		to, left := "queued", "running"
		if i%2 == 1 {
			to, left = "running", "queued"
		}
		o.ok("task.transition", map[string]any{"taskId": taskQ, "to": to})
		r := q.call("task.waitStatus", map[string]any{"taskId": taskQ, "until": left, "timeoutMs": 0})
		if r.Error == nil {
			stale++
		} else {
			require.Equal(t, wire.CodeWaitTimeout, r.Error.Code)
		}
	}
	require.Zero(t, stale, "waits answered with a status the task had left before they were sent")
}

// TestTaskWatchKeepsTheNewestReading: a reading replaces the watch's only when it was read at the same or a later
// position, and wakes the waiters only when it moves the status; an older reading, whatever it says, and a reading
// that failed, change nothing.
func TestTaskWatchKeepsTheNewestReading(t *testing.T) {
	running := taskReading{status: projections.TaskRunning, found: true}
	queued := taskReading{status: projections.TaskQueued, found: true}
	at := func(r taskReading, pos uint64) taskReading { r.at = pos; return r }
	for _, tc := range []struct {
		name  string
		r     taskReading
		moved bool
		want  taskReading
	}{
		{"an older reading of another status", at(running, 9), false, at(queued, 10)},
		{"an older reading of no task", taskReading{at: 3}, false, at(queued, 10)},
		{"an older reading of the same status", at(queued, 1), false, at(queued, 10)},
		{"a reading of the same position", at(queued, 10), false, at(queued, 10)},
		{"a later reading of the same status", at(queued, 12), false, at(queued, 12)},
		{"a later reading of another status", at(running, 11), true, at(running, 11)},
		{"a later reading of no task", taskReading{at: 11}, true, taskReading{at: 11}},
		// A cold run the log could not give back: the reading tells nothing of the task, not that it is gone.
		{"a later reading that failed", taskReading{at: 11, err: projections.ErrNotReadBack}, false, at(queued, 10)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tw := &taskWatch{status: queued.status, found: true, at: 10, changed: make(chan struct{})}
			before := tw.changed
			require.Equal(t, tc.moved, tw.observe(tc.r))
			require.Equal(t, tc.want, taskReading{status: tw.status, found: tw.found, at: tw.at})
			select {
			case <-before:
				require.True(t, tc.moved, "woke its waiters without moving")
				require.NotEqual(t, before, tw.changed, "a fresh channel for the next move")
			default:
				require.False(t, tc.moved, "moved without waking its waiters")
			}
		})
	}
}
