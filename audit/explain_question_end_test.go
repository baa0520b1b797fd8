package audit

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
)

// TestExplainRevocationClosingAQuestion: a credential's revocation whose task is parked on a question closes the
// question (asker-ended) and resumes the task in its batch: an engine decision, which replay --explain re-runs and
// explains, naming the question and why it closed, where it was left out of the decisions. A revocation of a task
// parked on nothing decided nothing more than the revocation, and is not listed; nor is the settlement's rule silent
// on the question of its shadow task that it closes.
func TestExplainRevocationClosingAQuestion(t *testing.T) {
	const run = "team_20261001090000_00000000000000q1"
	o := audittest.Orchestrator
	steps := append(delegatingTask(run, true),
		decided{o, &commands.TaskCreate{RunID: run, TaskID: "t2", Role: "explorer", Agent: "explorer", Title: "t",
			Cwd: "/srv", StepID: "s2"}},
		decided{o, &commands.TaskTransition{RunID: run, TaskID: "t2", To: "running"}},
		decided{o, &commands.CredentialIssue{RunID: run, TaskID: "t1", Digest: commands.SecretDigest("a")}},
		decided{o, &commands.CredentialIssue{RunID: run, TaskID: "t2", Digest: commands.SecretDigest("b")}},
		decided{audittest.Worker("t1"), &commands.WaitRequest{RunID: run, TaskID: "t1", Question: "go on?"}},
		decided{o, &commands.CredentialRevoke{RunID: run, TaskID: "t1", Reason: "worker gone"}},
		decided{o, &commands.CredentialRevoke{RunID: run, TaskID: "t2"}},
		decided{o, &commands.DelegateSpawned{RunID: run, SubID: "gc-00000001", PID: 7}},
		decided{audittest.Worker("gc-00000001"), &commands.WaitRequest{RunID: run, TaskID: "gc-00000001",
			Question: "which file?"}},
		decided{o, &commands.DelegateSettle{RunID: run, SubID: "gc-00000001", Outcome: commands.OutcomeOK,
			Text: "done"}},
	)
	wd, l, dir := decidedLog(t, steps)
	l = reopened(t, wd, l, dir)
	ds := explainedDecisions(t, l, "credential.revoke", "delegate.settle")
	require.Len(t, ds, 2, "%+v", ds)
	revoke, settle := ds[0], ds[1]
	require.Equal(t, "credential.revoke", revoke.Command)
	require.Equal(t, "t1", revoke.Subject)
	require.False(t, revoke.Drift, "%+v", revoke.Differences)
	require.Equal(t, revoke.Position+2, revoke.Last, "the revocation, the question's end and the task's resumption")
	require.Contains(t, revoke.Recorded, "credential revoked")
	require.Contains(t, revoke.Recorded, "t1 resumed")
	require.Contains(t, revoke.Rule, "its task t1 was parked on question")
	require.Contains(t, revoke.Rule, string(events.AskReasonAskerEnded))
	requireExplainedAtAlike(t, l, ds)

	require.Equal(t, "delegate.settle", settle.Command)
	require.False(t, settle.Drift, "%+v", settle.Differences)
	require.Contains(t, settle.Rule, "its shadow task gc-00000001 was parked on question")
}

// TestExplainAskExpiry: the engine clock's expiry of a question past its deadline times it out and resumes its task
// in one decision (ask.expire), which replay --explain re-runs and explains with the deadline it compared, as it does
// a delegation's expiry, where it was left out of the decisions.
func TestExplainAskExpiry(t *testing.T) {
	const run = "team_20261001090000_00000000000000q2"
	o := audittest.Orchestrator
	engine := events.Actor{Role: events.RoleEngine}
	steps := append(delegatingTask(run, true),
		decided{audittest.Worker("t1"), &commands.WaitRequest{RunID: run, TaskID: "t1", Question: "go on?",
			TimeoutSec: audittest.Ptr(1.0)}},
		decided{o, &commands.RunTransition{RunID: run, To: "blocked"}}, // the clock moves on a second
	)
	wd, l, dir := decidedLog(t, steps)
	r, _ := wd.State.Run(run)
	require.NotNil(t, r.WaitState, "t1 is parked")
	q := r.WaitState.QuestionID
	_, err := wd.Do(engine, &commands.AskExpire{RunID: run, QuestionID: q})
	require.NoError(t, err)
	l = reopened(t, wd, l, dir)
	ds := explainedDecisions(t, l, "ask.expire")
	require.Len(t, ds, 1)
	require.Equal(t, q, ds[0].Subject)
	require.False(t, ds[0].Drift, "%+v", ds[0].Differences)
	require.Equal(t, "question "+q+" closed, t1 resumed", ds[0].Recorded)
	require.Contains(t, ds[0].Rule, "expired: question "+q+" of t1, deadline 2026-10-01T09:00:08Z passed")
	requireExplainedAtAlike(t, l, ds)
}

// TestExplainLeavesATaskEndClosingItsQuestionAlone: a task.transition that ends or retries a task parked on a
// question closes the question first in its batch (ask.timedout asker-ended, then the task's event): the task's end,
// which is no engine decision, and not the engine clock's ask.expire, which, re-run before the deadline on a task
// still parked, refuses it and so read as drift.
func TestExplainLeavesATaskEndClosingItsQuestionAlone(t *testing.T) {
	for _, to := range []string{"failed", "cancelled", "queued"} {
		t.Run(to, func(t *testing.T) {
			const run = "team_20261001090000_00000000000000q3"
			steps := append(delegatingTask(run, true),
				decided{audittest.Worker("t1"), &commands.WaitRequest{RunID: run, TaskID: "t1", Question: "go on?"}},
				decided{audittest.Orchestrator, &commands.TaskTransition{RunID: run, TaskID: "t1", To: to}},
			)
			wd, l, dir := decidedLog(t, steps)
			l = reopened(t, wd, l, dir)
			res, err := Replay(l, ReplayOptions{Explain: true})
			require.NoError(t, err)
			for _, d := range res.Decisions {
				require.NotEqual(t, "ask.expire", d.Command, "%+v", d)
			}
			require.Zero(t, res.Drift())
		})
	}
}
