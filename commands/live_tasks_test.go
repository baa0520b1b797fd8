package commands

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// decideAndFold decides cmd on s as the orchestrator and folds what it records. NB: not through the scenario
// world, which keeps a copy of the state after every event: thousands of tasks would copy millions.
func decideAndFold(s *projections.State, cmd Command) (Decision, error) {
	d, err := Decide(s, cmd, Env{Config: s.Config(), Now: 1e18, Actor: events.Actor{Role: events.RoleOrchestrator}})
	for _, ev := range d.Events {
		ev.Position = s.Position + 1
		projections.Apply(s, ev)
	}
	return d, err
}

func createTask(id string) *TaskCreate {
	return &TaskCreate{RunID: "R", TaskID: id, Role: "executor", Agent: "executor", Title: "t", Cwd: "/w"}
}

// A budget abort cancels or skips every live task of its run in one decision. An orchestrator that queued tasks
// without end made that decision as large as its events quota allowed; a run holds at most MaxLiveTasksPerRun
// live tasks, so a budget abort writes at most that many, whatever was asked for before it.
func TestABudgetAbortEndsAtMostMaxLiveTasksPerRun(t *testing.T) {
	w := newScenarioWorld(t)
	require.NoError(t, w.config([]string{"quotaEvents=0", "quotaBytes=0"}))
	require.NoError(t, w.given(events.TypeRunCreated, "R", `{"team":"t","goal":"g","cwd":"/w","budgetTotal":100}`))
	require.NoError(t, w.given(events.TypeRunRunning, "R", `{}`))
	s := w.s
	const extra = 50
	refused := 0
	for i := range MaxLiveTasksPerRun + extra {
		_, err := decideAndFold(s, createTask(fmt.Sprintf("T%d", i)))
		if err != nil {
			rej := rejectedOf(err)
			require.NotNil(t, rej, "%v", err)
			require.Equal(t, CodeQuotaExceeded, rej.Code)
			require.Equal(t, "quota-live-tasks", rej.Reason)
			refused++
		}
	}
	require.Equal(t, extra, refused, "every task.create past the bound, and only those, is refused")
	require.Equal(t, MaxLiveTasksPerRun, s.LiveTasks("R"))
	_, err := decideAndFold(s, &TaskTransition{RunID: "R", TaskID: "T0", To: "running"})
	require.NoError(t, err)

	d, err := decideAndFold(s, &TaskUsage{RunID: "R", TaskID: "T0", Input: 99})
	require.NoError(t, err)
	ended := 0
	for _, ev := range d.Events {
		if ev.Type == events.TypeTaskCancelled || ev.Type == events.TypeTaskSkipped {
			ended++
		}
	}
	require.Equal(t, MaxLiveTasksPerRun, ended, "the abort ends every live task")
	require.Zero(t, s.LiveTasks("R"))
}

// Ending a task makes room for one more: a new task or the retry of an ended one. A retry while the run holds the
// most is refused and records nothing, like a task.create; so are neither a retry of a task that has not ended nor
// any wind-down.
func TestEndingATaskMakesRoomForAnother(t *testing.T) {
	w := runWorld(t, "quotaEvents=0", "quotaBytes=0") // R running, W running: one live task
	s := w.s
	for i := 1; i < MaxLiveTasksPerRun; i++ {
		_, err := decideAndFold(s, createTask(fmt.Sprintf("T%d", i)))
		require.NoError(t, err)
	}
	full := func(err error) {
		t.Helper()
		rej := rejectedOf(err)
		require.NotNil(t, rej, "refused for the bound")
		require.Equal(t, CodeQuotaExceeded, rej.Code)
		require.Equal(t, "quota-live-tasks", rej.Reason)
	}
	d, err := decideAndFold(s, createTask("X"))
	full(err)
	require.Empty(t, d.Events)

	_, err = decideAndFold(s, &TaskTransition{RunID: "R", TaskID: "W", To: "queued"})
	require.NoError(t, err, "W has not ended: its retry adds no live task")
	_, err = decideAndFold(s, &TaskTransition{RunID: "R", TaskID: "W", To: "running"})
	require.NoError(t, err)
	_, err = decideAndFold(s, &TaskTransition{RunID: "R", TaskID: "W", To: "failed", Error: "boom"})
	require.NoError(t, err, "a wind-down is never refused")
	_, err = decideAndFold(s, createTask("X"))
	require.NoError(t, err, "W's end made room")

	d, err = decideAndFold(s, &TaskTransition{RunID: "R", TaskID: "W", To: "queued"})
	full(err)
	require.Empty(t, d.Events)
	_, err = decideAndFold(s, &TaskTransition{RunID: "R", TaskID: "X", To: "cancelled"})
	require.NoError(t, err)
	_, err = decideAndFold(s, &TaskTransition{RunID: "R", TaskID: "W", To: "queued"})
	require.NoError(t, err, "X's end made room for W's retry")
	require.Equal(t, MaxLiveTasksPerRun, s.LiveTasks("R"))
}
