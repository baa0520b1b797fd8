package audit

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// TestExplainNestedBudgetMode: replay --explain re-decides the decisions of
// nested budget mode without drift and names the mode and its inputs: the
// run pool a workflow task draws from, the grandchild's grant (its own
// reservation), and a charge that stops at the grant.
func TestExplainNestedBudgetMode(t *testing.T) {
	const run = "team_20261001090000_0000000000000003"
	cfg := projections.DefaultConfig()
	cfg.BudgetMode = events.BudgetModeNested
	w, l, dir := decidedLog(t, []decided{
		{audittest.Admin, &commands.Configure{Config: cfg}},
		{audittest.Admin, &commands.RunCreate{RunID: run, Team: "crew", Cwd: "/srv", BudgetTotal: new(int64(100_000))}},
		{audittest.Orchestrator, &commands.RunTransition{RunID: run, To: "running"}},
		{audittest.Orchestrator, &commands.TaskCreate{RunID: run, TaskID: "t1", Role: "executor", Agent: "executor", Cwd: "/a"}},
		{audittest.Orchestrator, &commands.TaskTransition{RunID: run, TaskID: "t1", To: "running"}},
		{audittest.Orchestrator, &commands.TaskCreate{RunID: run, TaskID: "t2", Role: "executor", Agent: "executor", Cwd: "/b"}},
		{audittest.Orchestrator, &commands.TaskTransition{RunID: run, TaskID: "t2", To: "running"}},
		{audittest.Worker("t1"), &commands.DelegateRequest{RunID: run, TaskID: "t1", Prompt: "p", BudgetTokens: audittest.Ptr[int64](60_000)}},
		{audittest.Orchestrator, &commands.DelegateSpawned{RunID: run, SubID: "gc-00000001", PID: 7}},
	})
	var rej *commands.RejectedError
	_, err := w.Do(audittest.Worker("t2"), &commands.DelegateRequest{RunID: run, TaskID: "t2", Prompt: "p", BudgetTokens: audittest.Ptr[int64](50_000)})
	require.ErrorAs(t, err, &rej)
	require.Equal(t, events.ReasonBudgetInsufficient, rej.Reason)
	_, err = w.Do(audittest.Worker("gc-00000001"), &commands.DelegateRequest{RunID: run, TaskID: "gc-00000001", Prompt: "p", BudgetTokens: audittest.Ptr[int64](70_000)})
	require.ErrorAs(t, err, &rej)
	_, err = w.Do(audittest.Orchestrator, &commands.DelegateSettle{RunID: run, SubID: "gc-00000001", Outcome: commands.OutcomeOK, UsageTokens: audittest.Ptr[int64](150_000)})
	require.NoError(t, err)
	l = reopened(t, w, l, dir)

	res, err := Replay(l, ReplayOptions{Explain: true})
	require.NoError(t, err)
	require.Zero(t, res.Drift())
	var rules []string
	for _, d := range res.Decisions {
		rules = append(rules, d.Rule)
	}
	require.Contains(t, rules, "config change: budgetMode picrew -> nested")
	require.Contains(t, rules, "admitted: metered (budget mode nested), within grant (reserves 60000 of remaining "+
		"100000 = min(100000 granted - 0 spent, run pool 100000 budgetTotal - 0 spent by its workflow tasks)), depth 2 <= 4, slots 0/2")
	require.Contains(t, rules, "budget-insufficient (budget mode nested: requested 50000 > remaining "+
		"40000 = min(100000 granted - 0 spent, run pool 100000 budgetTotal - 60000 spent by its workflow tasks))")
	require.Contains(t, rules, "budget-insufficient (budget mode nested: requested 70000 > remaining 60000 = 60000 granted - 0 spent)")
	require.Contains(t, rules, "usage 150000 > reserved 60000: charged 40000, 50000 uncharged "+
		"(budget mode nested: a charge stops at what the parent may still spend); slot freed")
}
