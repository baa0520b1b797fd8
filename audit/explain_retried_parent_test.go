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
			steps := append(delegatingTask(run, tc.reroute),
				decided{o, &commands.TaskTransition{RunID: run, TaskID: "t1", To: "queued", Reason: "retry"}},
				decided{o, &commands.TaskTransition{RunID: run, TaskID: "t1", To: "running"}},
				decided{o, &commands.DelegateSettle{RunID: run, SubID: sub, Outcome: commands.OutcomeOK, Text: "done"}},
			)
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

// TestExplainReroutedSettlementNamesWhy: replay --explain names why a settlement's result went to the run inbox, with
// the inputs the engine read: the parent task ended (its status), or, under rerouteEndedAttempts, the attempt of the
// parent that made the delegation was retried since (its attempt then and now), where it, and the timeline's line of
// the result, said "parent ended" for both, of a parent that was running again.
func TestExplainReroutedSettlementNamesWhy(t *testing.T) {
	const run = "team_20261001090000_00000000000000r2"
	const sub = "gc-00000001"
	o := audittest.Orchestrator
	for _, tc := range []struct {
		name     string
		parentTo []string // the parent's transitions after the request
		want     string
	}{
		{"a parent retried", []string{"queued", "running"},
			"result rerouted to the run inbox (the attempt 0 of parent task t1 that made it has ended: the task was " +
				"retried since, attempt 1 now; rerouteEndedAttempts=true)"},
		{"a parent ended", []string{"completed"},
			"result rerouted to the run inbox (parent task t1 is completed)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			steps := delegatingTask(run, true)
			for _, to := range tc.parentTo {
				steps = append(steps, decided{o, &commands.TaskTransition{RunID: run, TaskID: "t1", To: to}})
			}
			steps = append(steps, decided{o, &commands.DelegateSettle{RunID: run, SubID: sub,
				Outcome: commands.OutcomeOK, Text: "done"}})
			wd, l, dir := decidedLog(t, steps)
			l = reopened(t, wd, l, dir)
			ds := explainedDecisions(t, l, "delegate.settle")
			require.Len(t, ds, 1)
			require.False(t, ds[0].Drift, "%+v", ds[0].Differences)
			require.Contains(t, ds[0].Rule, tc.want)
			requireExplainedAtAlike(t, l, ds)

			// The timeline's line of the result says what its event knows: the attempt that asked for it ended.
			var meaning string
			_, err := Replay(l, ReplayOptions{Timeline: func(e Entry) {
				if e.Position == ds[0].Position {
					meaning = e.Meaning
				}
			}})
			require.NoError(t, err)
			require.Contains(t, meaning, "to the run inbox (rerouted: the attempt of its parent that asked for it ended)")
		})
	}
}

// delegatingTask is the steps that make run, with task t1 running, and a delegation of t1 (gc-00000001) under a
// config with rerouteEndedAttempts as reroute.
func delegatingTask(run string, reroute bool) []decided {
	o := audittest.Orchestrator
	cfg := projections.DefaultConfig()
	cfg.RerouteEndedAttempts = reroute
	return []decided{
		{audittest.Admin, &commands.Configure{Config: cfg}},
		{audittest.Admin, &commands.RunCreate{RunID: run, Team: "crew", Goal: "g", Cwd: "/srv"}},
		{o, &commands.RunTransition{RunID: run, To: "running"}},
		{o, &commands.TaskCreate{RunID: run, TaskID: "t1", Role: "explorer", Agent: "explorer", Title: "t",
			Cwd: "/srv", StepID: "s1"}},
		{o, &commands.TaskTransition{RunID: run, TaskID: "t1", To: "running"}},
		{audittest.Worker("t1"), &commands.DelegateRequest{RunID: run, TaskID: "t1", Prompt: "p"}},
	}
}
