package audit

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/commands"
)

// TestExplainRunBudgetThresholds: a usage report that crossed a threshold of its run's budget recorded the engine's
// decision (a warning, a task flagged above its fair share, the abort that cancels the run's tasks and fails it);
// replay --explain re-decides it with the state of the time and names the threshold and the numbers it compared. A
// report that crossed nothing decided nothing, and is not listed.
func TestExplainRunBudgetThresholds(t *testing.T) {
	const run = "team_20261001090000_0000000000000001"
	o := audittest.Orchestrator
	usage := func(task string, in int64) decided {
		return decided{o, &commands.TaskUsage{RunID: run, TaskID: task, Input: in}}
	}
	w, l, dir := decidedLog(t, []decided{
		{audittest.Admin, &commands.RunCreate{RunID: run, Team: "crew", Cwd: "/r", BudgetTotal: new(int64(1000))}},
		{o, &commands.RunTransition{RunID: run, To: "running"}},
		{o, &commands.TaskCreate{RunID: run, TaskID: "t1", Role: "explorer", Agent: "explorer", Cwd: "/r", StepID: "s1"}},
		{o, &commands.TaskCreate{RunID: run, TaskID: "t2", Role: "explorer", Agent: "explorer", Cwd: "/r", StepID: "s2"}},
		{o, &commands.TaskTransition{RunID: run, TaskID: "t1", To: "running"}},
		usage("t1", 100),
		usage("t1", 850),
		usage("t1", 960),
	})
	l = reopened(t, w, l, dir)

	reports := explainedDecisions(t, l, "task.usage")
	require.Len(t, reports, 2)
	require.Equal(t, "t1", reports[0].Subject)
	require.Equal(t, "budget warning, fair share passed", reports[0].Recorded)
	require.Equal(t, "run budget 850 of 1000 used >= the warning at 80%; task t1 uses 850 > 50% of the run budget", reports[0].Rule)
	require.Equal(t, "budget abort, t1 cancelled, t2 skipped, run failed", reports[1].Recorded)
	require.Equal(t, "run budget 960 of 1000 used >= the abort at 95%: its live tasks end and the run fails", reports[1].Rule)
	for _, d := range reports {
		require.False(t, d.Drift, "#%d: %+v", d.Position, d.Differences)
	}
	requireExplainedAtAlike(t, l, reports)
}
