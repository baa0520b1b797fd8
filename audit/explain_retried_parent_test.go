package audit

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// TestExplainRetriedParentsSettlement: a delegation whose parent task was retried after it was made is settled into
// the run inbox under rerouteEndedAttempts, and into the parent's mailbox under a config without it, as every log
// written before the knob holds it. Either is decided again with the config recorded in force, so replay --explain
// reports no drift in either log.
func TestExplainRetriedParentsSettlement(t *testing.T) {
	const run = "team_20261001090000_00000000000000r1"
	const sub = "gc-00000001"
	for _, tc := range []struct {
		name     string
		reroute  bool
		wantTo   string
		rerouted bool
	}{
		{"a log written before the knob", false, "t1", false},
		{"a log written under the knob", true, events.RunInbox, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := audittest.Orchestrator
			cfg := projections.DefaultConfig()
			cfg.RerouteEndedAttempts = tc.reroute
			steps := []decided{
				{audittest.Admin, &commands.Configure{Config: cfg}},
				{audittest.Admin, &commands.RunCreate{RunID: run, Team: "crew", Goal: "g", Cwd: "/srv"}},
				{o, &commands.RunTransition{RunID: run, To: "running"}},
				{o, &commands.TaskCreate{RunID: run, TaskID: "t1", Role: "explorer", Agent: "explorer", Title: "t", Cwd: "/srv", StepID: "s1"}},
				{o, &commands.TaskTransition{RunID: run, TaskID: "t1", To: "running"}},
				{audittest.Worker("t1"), &commands.DelegateRequest{RunID: run, TaskID: "t1", Prompt: "p"}},
				{o, &commands.TaskTransition{RunID: run, TaskID: "t1", To: "queued", Reason: "retry"}},
				{o, &commands.TaskTransition{RunID: run, TaskID: "t1", To: "running"}},
				{o, &commands.DelegateSettle{RunID: run, SubID: sub, Outcome: commands.OutcomeOK, Text: "done"}},
			}
			wd, l, dir := decidedLog(t, steps)
			msgs, err := wd.State.Mailbox(run, tc.wantTo, projections.MailboxFilter{})
			require.NoError(t, err)
			require.Len(t, msgs.Messages, 1, "the result is in %q", tc.wantTo)
			require.Equal(t, tc.rerouted, msgs.Messages[0].Rerouted)
			l = reopened(t, wd, l, dir)
			res, err := Replay(l, ReplayOptions{Explain: true})
			require.NoError(t, err)
			settled := false
			for _, d := range res.Decisions {
				require.False(t, d.Drift, "%s at %d drifted: %+v", d.Command, d.Position, d.Differences)
				settled = settled || d.Command == "delegate.settle" && d.Subject == sub
			}
			require.True(t, settled, "the settlement is explained")
		})
	}
}
