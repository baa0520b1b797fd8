package audit

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// TestExplainWaitMethodsRefusal: a wait method refused because the config switches the wait methods off records
// policy.action; replay --explain re-decides it with the config then in force, names the switch, and calls a
// refusal recorded while the methods were on drift.
func TestExplainWaitMethodsRefusal(t *testing.T) {
	const run = "team_20261001090000_0000000000000001"
	off := projections.DefaultConfig()
	off.WaitMethodsEnabled = false
	o, worker := audittest.Orchestrator, audittest.Worker("t1")
	w, l, dir := decidedLogRefusals(t, []decided{
		{audittest.Admin, &commands.Configure{Config: off}},
		{audittest.Admin, &commands.RunCreate{RunID: run, Team: "crew", Cwd: "/r"}},
		{o, &commands.RunTransition{RunID: run, To: "running"}},
		{o, &commands.TaskCreate{RunID: run, TaskID: "t1", Role: "explorer", Agent: "explorer", Cwd: "/r", StepID: "s"}},
		{o, &commands.TaskTransition{RunID: run, TaskID: "t1", To: "running"}},
		{worker, &commands.WaitRequest{RunID: run, TaskID: "t1", Question: "which branch?"}},
		{worker, &commands.WaitResolve{RunID: run, TaskID: "t1", QuestionID: "q1"}},
		{audittest.Admin, &commands.Configure{Config: projections.DefaultConfig()}},
	})
	// A refusal no decision makes: the methods are on again.
	require.NoError(t, w.Raw(events.Event{Stream: run, Type: events.TypePolicyAction, Actor: worker,
		Payload: &events.PolicyAction{TaskID: "t1", Action: "wait.request", Reason: events.ReasonWaitMethodsDisabled,
			Policy: events.PolicyWaitMethodsOff}}))
	l = reopened(t, w, l, dir)

	refusals := explainedDecisions(t, l, "wait.request", "wait.resolve")
	require.Len(t, refusals, 3)
	for i, d := range refusals {
		require.Equal(t, "t1", d.Subject)
		require.Equal(t, "refused: wait-methods-disabled", d.Recorded)
		require.Equal(t, i == 2, d.Drift, "#%d", d.Position)
	}
	require.Equal(t, "wait-methods-disabled (broker.waitMethodsEnabled=false)", refusals[0].Rule)
	require.Equal(t, "wait.resolve", refusals[1].Command)
	require.Equal(t, "question asked", refusals[2].Today)
	require.Equal(t, "broker.waitMethodsEnabled=true: not refused", refusals[2].Rule)
	requireExplainedAtAlike(t, l, refusals)
}
