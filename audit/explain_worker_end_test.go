package audit

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// TestExplainWorkerEndLease: the lease.cleared that follows the end of a
// job's worker belongs to the decision that ended it. A delegation's
// settlement whose shadow task worked a job is decided again with its
// clearing and does not drift; a log written before the clearing was
// recorded shows that settlement as drift (today clears the lease).
func TestExplainWorkerEndLease(t *testing.T) {
	const run = "team_20261001090000_00000000000000w1"
	const sub = "gc-00000001"
	grant := grantOf("read")
	nonce := commands.SecretDigest("n")
	o := audittest.Orchestrator
	req := func(task, job string) decided {
		return decided{audittest.Worker(task), &commands.ProxyRequest{RunID: run, TaskID: task, JobID: job, RequestID: "r1",
			RequestIDChars: 2, NonceDigest: nonce, Tool: "read", Args: json.RawMessage(`{}`)}}
	}
	steps := []decided{
		{audittest.Admin, &commands.RunCreate{RunID: run, Team: "crew", Goal: "g", Cwd: "/srv", BudgetTotal: new(int64(1000))}},
		{o, &commands.RunTransition{RunID: run, To: "running"}},
		{o, &commands.TaskCreate{RunID: run, TaskID: "t1", Role: "explorer", Agent: "explorer", Title: "t", Cwd: "/srv", StepID: "s1"}},
		{o, &commands.TaskTransition{RunID: run, TaskID: "t1", To: "running"}},
		{o, &commands.TaskCreate{RunID: run, TaskID: "t2", Role: "engineer", Agent: "engineer", Title: "t", Cwd: "/srv", StepID: "s2"}},
		{o, &commands.TaskTransition{RunID: run, TaskID: "t2", To: "running"}},
		// A workflow task's job: the task completes with a call in flight.
		{o, &commands.JobCreate{RunID: run, JobID: "J1", TaskID: "t2", Tools: grant, NonceDigest: nonce}},
		{o, &commands.LeaseOpen{RunID: run, JobID: "J1", Mode: events.LeaseStart, RootToolCallID: "c1"}},
		req("t2", "J1"),
		{o, &commands.TaskTransition{RunID: run, TaskID: "t2", To: "completed"}},
		{o, &commands.JobTransition{RunID: run, JobID: "J1", To: events.JobCancelled}},
		// A shadow task's job: its delegation settles with a call in flight.
		{audittest.Worker("t1"), &commands.DelegateRequest{RunID: run, TaskID: "t1", Prompt: "p", BudgetTokens: audittest.Ptr[int64](100)}},
		{o, &commands.JobCreate{RunID: run, JobID: "J2", TaskID: sub, Tools: grant, NonceDigest: nonce}},
		{o, &commands.LeaseOpen{RunID: run, JobID: "J2", Mode: events.LeaseStart, RootToolCallID: "c2"}},
		req(sub, "J2"),
	}
	settle := &commands.DelegateSettle{RunID: run, SubID: sub, Outcome: commands.OutcomeOK, Text: "done"}

	t.Run("recorded with the clearing", func(t *testing.T) {
		wd, l, dir := decidedLogRefusals(t, append(steps, decided{o, settle}))
		j, _ := wd.State.JobHeader(run, "J2")
		require.False(t, j.LeaseActive, "the settlement cleared the lease")
		l = reopened(t, wd, l, dir)
		res, err := Replay(l, ReplayOptions{Explain: true})
		require.NoError(t, err)
		settled := false
		for _, d := range res.Decisions {
			require.False(t, d.Drift, "%s at %d drifted: %+v", d.Command, d.Position, d.Differences)
			require.NotEqual(t, "lease.clear", d.Command, "a worker's end is not explained as a lease.clear of its own (at %d)", d.Position)
			if d.Command == settle.Kind() && d.Subject == sub {
				settled = true
				require.Equal(t, events.TypeLeaseCleared, typeAt(t, l, d.Last), "the clearing is the settlement's last event")
			}
		}
		require.True(t, settled, "the settlement is explained")
	})

	t.Run("recorded before the clearing", func(t *testing.T) {
		wd, l, dir := decidedLogRefusals(t, steps)
		env := commands.Env{Config: wd.State.Config(), Now: wd.Now, NewID: wd.NewID, Actor: o}
		dec, err := commands.Decide(wd.State, settle, env)
		require.NoError(t, err)
		var old []events.Event
		for _, ev := range dec.Events {
			if ev.Type != events.TypeLeaseCleared {
				old = append(old, ev)
			}
		}
		require.Len(t, old, len(dec.Events)-1)
		require.NoError(t, wd.Raw(old...))
		l = reopened(t, wd, l, dir)
		require.Equal(t, []string{settle.Kind()}, driftedCommands(t, l),
			"only the settlement drifts: today it clears the lease")
	})
}

// TestExplainLeaseOpenForAnEndedWorker: a log written before lease.open refused a job whose worker had ended holds
// the lease it opened; decided again, that lease.open is refused (worker-ended), so the explainer reports it as
// drift, and the task transition that ended the worker, not decided again, does not drift.
func TestExplainLeaseOpenForAnEndedWorker(t *testing.T) {
	const run = "team_20261001090000_00000000000000w2"
	grant := grantOf("read")
	o := audittest.Orchestrator
	wd, l, dir := decidedLogRefusals(t, []decided{
		{audittest.Admin, &commands.RunCreate{RunID: run, Team: "crew", Goal: "g", Cwd: "/srv"}},
		{o, &commands.RunTransition{RunID: run, To: "running"}},
		{o, &commands.TaskCreate{RunID: run, TaskID: "t1", Role: "engineer", Agent: "engineer", Title: "t", Cwd: "/srv", StepID: "s1"}},
		{o, &commands.TaskTransition{RunID: run, TaskID: "t1", To: "running"}},
		{o, &commands.JobCreate{RunID: run, JobID: "J", TaskID: "t1", Tools: grant, NonceDigest: commands.SecretDigest("n")}},
		{o, &commands.TaskTransition{RunID: run, TaskID: "t1", To: "completed"}},
	})
	// The lease the old rule opened: what lease.open decided before it refused an ended worker.
	require.NoError(t, wd.Raw(
		events.Event{Stream: run, Type: events.TypeLeaseOpened, Actor: o,
			Payload: &events.LeaseOpened{JobID: "J", Generation: 1, RootToolCallID: "c1", Mode: events.LeaseStart}},
		events.Event{Stream: run, Type: events.TypeJobStatusChanged, Actor: o,
			Payload: &events.JobStatusChanged{JobID: "J", From: events.JobStarting, To: events.JobRunning, Reason: events.LeaseStart}},
	))
	l = reopened(t, wd, l, dir)
	require.Equal(t, []string{"lease.open"}, driftedCommands(t, l),
		"only the lease.open drifts: today it is refused worker-ended")
}

// driftedCommands are the commands of l that crewctl replay --explain finds decided otherwise today, in log order.
func driftedCommands(t *testing.T, l *eventlog.Log) []string {
	t.Helper()
	res, err := Replay(l, ReplayOptions{Explain: true})
	require.NoError(t, err)
	var drifted []string
	for _, d := range res.Decisions {
		if d.Drift {
			drifted = append(drifted, d.Command)
		}
	}
	return drifted
}

// typeAt is the type of the event at position pos of l.
func typeAt(t *testing.T, l *eventlog.Log, pos uint64) string {
	t.Helper()
	it := l.Read(pos)
	defer it.Close()
	require.True(t, it.Next(), "an event at %d", pos)
	require.NoError(t, it.Err())
	return it.Event().Type
}

// TestWorkerEndClearingGroupsWithItsEnd: of the events without a command id
// read at one clock, a lease.cleared continues the decision of the worker's
// end before it only when it is that end's clearing (worker-ended): a
// manager's lease.clear or job.transition that followed another worker's end
// at the same clock reading is a decision of its own, explained as such.
func TestWorkerEndClearingGroupsWithItsEnd(t *testing.T) {
	const run, at = "R", int64(7)
	ev := func(typ string, payload any) events.Event {
		return events.Event{Stream: run, Type: typ, Time: at, Payload: payload}
	}
	ended := ev(events.TypeTaskCompleted, &events.TaskCompleted{TaskID: "X"})
	cases := []struct {
		name   string
		last   events.Event
		reason string
		same   bool
	}{
		{"the end's clearing", ended, commands.LeaseReasonWorkerEnded, true},
		{"a settlement's clearing", ev(events.TypeDelegateCompleted, &events.DelegateCompleted{SubID: "gc-1"}), commands.LeaseReasonWorkerEnded, true},
		{"a manager's lease.clear", ended, "cleared", false},
		{"a manager's lease.clear with a reason", ended, "stop", false},
		{"a job.transition's clearing", ended, events.JobCancelled, false},
		{"after a refused call", ev(events.TypeProxyRejected, &events.ProxyRejected{JobID: "J"}), "cleared", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clearing := ev(events.TypeLeaseCleared, &events.LeaseCleared{JobID: "J", Generation: 1, RootToolCallID: "c1", Reason: c.reason})
			require.Equal(t, c.same, sameDecision(c.last, c.last, clearing))
		})
	}
}
