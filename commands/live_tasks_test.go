package commands

import (
	"fmt"
	"runtime"
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

// A decision that reads its run's live tasks walks only those: a budget abort, a worker's message to its group, an
// executor's delegate.request (its overlap check) and an orchestrator's message to all (refused past
// MaxRecipients) cost the same however many tasks the run has ended. They walked, and copied, every task the run
// ever held: a worker could make the single writer copy hundreds of thousands of tasks per request.
func TestDecisionsWalkOnlyTheLiveTasks(t *testing.T) {
	executor := "executor"
	worker := events.Actor{Role: events.RoleWorker, TaskID: "W"}
	orchestrator := events.Actor{Role: events.RoleOrchestrator}
	decisions := map[string]struct {
		actor events.Actor
		cmd   Command
	}{
		"budget abort":     {worker, &TaskUsage{RunID: "R", TaskID: "W", Input: 99}},
		"message to group": {worker, &MessageSend{RunID: "R", FromTask: "W", To: []string{ToGroup}, Body: "b"}},
		"message to all":   {orchestrator, &MessageSend{RunID: "R", To: []string{ToAll}, Body: "b"}},
		"executor delegation": {worker,
			&DelegateRequest{RunID: "R", TaskID: "W", Prompt: "p", Role: &executor}},
	}
	cost := func(ended int) map[string]float64 {
		w := newScenarioWorld(t)
		require.NoError(t, w.config([]string{"quotaEvents=0", "quotaBytes=0", "nestingEnabled=true", "maxSlots=4"}))
		require.NoError(t, w.given(events.TypeRunCreated, "R",
			`{"team":"t","goal":"g","cwd":"/w","budgetTotal":100}`))
		require.NoError(t, w.given(events.TypeRunRunning, "R", `{}`))
		s := w.s
		for i := range ended {
			id := fmt.Sprintf("E%d", i)
			_, err := decideAndFold(s, createTask(id))
			require.NoError(t, err)
			_, err = decideAndFold(s, &TaskTransition{RunID: "R", TaskID: id, To: "cancelled"})
			require.NoError(t, err)
		}
		for _, id := range []string{"W", "L1", "L2"} {
			_, err := decideAndFold(s, createTask(id))
			require.NoError(t, err)
		}
		_, err := decideAndFold(s, &TaskTransition{RunID: "R", TaskID: "W", To: "running"})
		require.NoError(t, err)
		out := map[string]float64{}
		for name, d := range decisions {
			env := Env{Config: s.Config(), Now: 1e18, Actor: d.actor}
			out[name] = bytesPerRun(func() { Decide(s, d.cmd, env) })
		}
		return out
	}
	// NB: a message to all stops at MaxRecipients+1 tasks, which it then refuses: a few KiB more than with none
	// ended, against megabytes when every task was copied. The slack is wide, since the count is the process's: a
	// stray allocation of another goroutine must not fail the test, and the walk of 20,000 tasks is megabytes.
	const slack = 256 << 10
	few, many := cost(0), cost(20_000)
	for name := range decisions {
		t.Run(name, func(t *testing.T) {
			require.LessOrEqual(t, many[name], few[name]+slack,
				"%.0f bytes allocated with 20,000 ended tasks, %.0f with none", many[name], few[name])
		})
	}
}

// bytesPerRun is the bytes f allocates, the mean of a few runs.
func bytesPerRun(f func()) float64 {
	const runs = 4
	f() // warm up
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return float64(after.TotalAlloc-before.TotalAlloc) / runs
}
