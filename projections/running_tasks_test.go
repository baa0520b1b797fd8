package projections

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// TestRunningTasksCountsWithoutAWalk folds run R with n more live tasks beside P, a third of them running in /w
// as executors, then takes every task record but P's out of the run (a walk that reads one panics): RunningTasks
// must answer from its count, at 1,000 tasks as at 10,000, since delegate.request asks it on the writer for every
// request a worker sends.
func TestRunningTasksCountsWithoutAWalk(t *testing.T) {
	for _, n := range []int{1_000, 10_000} {
		var h history
		fixture(&h, 0, true)
		for i := range n {
			id := fmt.Sprintf("t%05d", i)
			h.add(runR, events.TypeTaskCreated, &events.TaskCreated{TaskID: id, Role: "executor",
				Agent: "a", Cwd: "/v"})
			if i%3 == 0 {
				h.add(runR, events.TypeTaskStarted, &events.TaskStarted{TaskID: id, Cwd: "/w"})
			}
		}
		s := fold(h.evs)
		r := s.runs[runR]
		for id := range r.tasks {
			if id != taskP {
				delete(r.tasks, id)
			}
		}
		require.NotPanics(t, func() {
			require.Equal(t, 1+(n+2)/3, s.RunningTasks(runR, "executor", "/w"), "n=%d: P and every third task", n)
			require.Zero(t, s.RunningTasks(runR, "executor", "/v"), "n=%d: none runs in the cwd it was created in", n)
			require.Zero(t, s.RunningTasks(runR, "explorer", "/w"), "n=%d", n)
			require.Zero(t, s.RunningTasks("nope", "executor", "/w"), "n=%d", n)
		}, "n=%d: RunningTasks read a task's record", n)
	}
}

// TestRunningTasksFollowsStatusAndCwd: a task counts while it runs, in the cwd its start gave it, whatever moved it
// (a start, a wait and its resume, an end, a retry, a shadow task's spawn and settlement).
func TestRunningTasksFollowsStatusAndCwd(t *testing.T) {
	var h history
	fixture(&h, 0, true)
	count := func(role, cwd string) int { return fold(h.evs).RunningTasks(runR, role, cwd) }
	require.Equal(t, 1, count("executor", "/w"), "P runs")
	h.add(runR, events.TypeTaskCreated, &events.TaskCreated{TaskID: "Q", Role: "executor", Agent: "a", Cwd: "/w"})
	require.Equal(t, 1, count("executor", "/w"), "Q is queued")
	h.add(runR, events.TypeTaskStarted, &events.TaskStarted{TaskID: "Q", Cwd: "/q"})
	require.Equal(t, 1, count("executor", "/w"))
	require.Equal(t, 1, count("executor", "/q"), "Q runs in the cwd its start gave it")
	h.add(runR, events.TypeTaskWaiting, &events.TaskWaiting{TaskID: "Q", QuestionID: "q1"})
	require.Zero(t, count("executor", "/q"), "Q waits")
	h.add(runR, events.TypeTaskResumed, &events.TaskResumed{TaskID: "Q", QuestionID: "q1"})
	require.Equal(t, 1, count("executor", "/q"))
	h.add(runR, events.TypeTaskFailed, &events.TaskFailed{TaskID: "Q"})
	require.Zero(t, count("executor", "/q"), "Q ended")
	h.add(runR, events.TypeTaskRetried, &events.TaskRetried{TaskID: "Q"})
	require.Zero(t, count("executor", "/q"), "Q is queued again")
	admitBatch(&h, "gc-1", 0, false, 0)
	require.Zero(t, count("explorer", "/w"), "an admitted shadow task is queued")
	h.add(runR, events.TypeDelegateSpawned, &events.DelegateSpawned{TaskID: taskP, SubID: "gc-1", PID: 7})
	require.Equal(t, 1, count("explorer", "/w"), "a spawned shadow task runs")
	settleBatch(&h, "gc-1", events.TypeDelegateCompleted, 0, 0)
	require.Zero(t, count("explorer", "/w"), "a settled shadow task ended")
	require.Equal(t, 1, count("executor", "/w"), "P still runs")
}
