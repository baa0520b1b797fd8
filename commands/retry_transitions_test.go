package commands

import (
	"context"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// A command id's outcome is the log's, not the engine's memory: a retry is answered the first answer (the same
// result bytes, code and message, position, and no new event) and another request under the id is refused, whatever
// happened to the engine between the two — the run went cold and came back hot, crewd restarted from a snapshot or
// from none, the outcome left the log's index of recent ones. Each principal's ids are its own throughout.

// retried is a command sent once with an id, its first answer, and another request of the same principal under
// the same id.
type retried struct {
	req   Request
	other Command
	first Reply
}

// retryRun is the run the retried commands act on; retryOther is a second run whose orchestrator uses the same ids.
const (
	retryRun   = "R"
	retryOther = "Q"
)

// sendRetried sends a command of every kind of outcome under ids the principals share: accepted with events, a
// refusal that records nothing but itself, a rejection recorded with events, an accepted command of a worker and
// of the admin, and the same id used by the admin, two orchestrators and a worker for unrelated commands.
func sendRetried(t *testing.T, f *engineFixture) []*retried {
	t.Helper()
	f.seedRunAs(retryRun)
	f.seedRunAs(retryOther)
	adm, orch, orchQ := events.AdminPrincipal(), events.OrchestratorPrincipal(retryRun),
		events.OrchestratorPrincipal(retryOther)
	wk := events.WorkerPrincipal(retryRun, "02_exec")
	task := func(run, id string) Command {
		return &TaskCreate{RunID: run, TaskID: id, Role: "executor", Agent: "a", Title: "t", Cwd: "/w", StepID: "s"}
	}
	rs := []*retried{
		{req: as(orch, "same", task(retryRun, "03_a")), other: task(retryRun, "03_b")},
		{req: as(orchQ, "same", task(retryOther, "03_q")), other: task(retryOther, "03_b")},
		{req: as(adm, "same", &RunCreate{RunID: "S", Team: "t", Goal: "g", Cwd: "/w"}),
			other: &RunCreate{RunID: "S2", Team: "t", Goal: "g", Cwd: "/w"}},
		{req: as(wk, "same", &MessageSend{RunID: retryRun, FromTask: "02_exec", To: []string{ToParent}, Body: "hi"}),
			other: &MessageSend{RunID: retryRun, FromTask: "02_exec", To: []string{ToParent}, Body: "bye"}},
		{req: as(orch, "missing", &TaskTransition{RunID: retryRun, TaskID: "09_none", To: "running"}),
			other: &TaskTransition{RunID: retryRun, TaskID: "09_none", To: "failed"}},
		{req: as(wk, "usage", &TaskUsage{RunID: retryRun, TaskID: "02_exec", Input: 5, Output: 1, Turns: 1}),
			other: &TaskUsage{RunID: retryRun, TaskID: "02_exec", Input: 6, Output: 1, Turns: 1}},
		{req: as(wk, "delegate", &DelegateRequest{RunID: retryRun, TaskID: "02_exec", Prompt: "p"}),
			other: &DelegateRequest{RunID: retryRun, TaskID: "02_exec", Prompt: "q"}},
		{req: as(wk, "denied", &DelegateRequest{RunID: retryRun, TaskID: "02_exec", Prompt: "p",
			Role: ptr("reviewer")}),
			other: &DelegateRequest{RunID: retryRun, TaskID: "02_exec", Prompt: "p", Role: ptr("planner")}},
	}
	for _, r := range rs {
		r.first = f.submit(r.req)
		require.False(t, r.first.Replayed, "%s %q is decided", r.req.Command.Kind(), r.req.CommandID)
	}
	require.Nil(t, rs[0].first.Rejected)
	require.Nil(t, rs[1].first.Rejected, "run Q's orchestrator gets its own command decided")
	require.NotEqual(t, rs[0].first.Result, rs[1].first.Result)
	require.NotNil(t, rs[4].first.Rejected, "a transition of a task the run does not hold is refused")
	require.Zero(t, rs[4].first.Position, "and records nothing but itself")
	require.NotNil(t, rs[7].first.Rejected, "a role the policy denies is refused")
	require.NotZero(t, rs[7].first.Position, "and recorded with events")
	return rs
}

// requireAnsweredAsFirst retries every command of rs and sends its other request, and requires the first answers
// and refusals alike, with nothing appended.
func requireAnsweredAsFirst(t *testing.T, f *engineFixture, rs []*retried, when string) {
	t.Helper()
	head, _ := f.log.Head()
	for _, r := range rs {
		again := f.submit(r.req)
		require.True(t, again.Replayed, "%s: %s %q of %s is answered its outcome", when, r.req.Command.Kind(),
			r.req.CommandID, r.req.Principal.Key())
		require.Equal(t, string(r.first.Result), string(again.Result), "%s: the same result bytes", when)
		require.Equal(t, r.first.Rejected, again.Rejected, "%s: the same refusal", when)
		require.Equal(t, r.first.Position, again.Position, "%s", when)

		other := r.req
		other.Command = r.other
		refused := f.submit(other)
		require.Equal(t, reusedID(), refused.Rejected, "%s: %s %q of %s used for another request", when,
			r.req.Command.Kind(), r.req.CommandID, r.req.Principal.Key())
	}
	after, _ := f.log.Head()
	require.Equal(t, head, after, "%s: nothing appended", when)
	f.eng.Read(func(s *projections.State) {
		require.Len(t, s.Delegations(retryRun), 1, "%s: no delegation admitted twice", when)
		_, ok := s.Task(retryRun, "03_b")
		require.False(t, ok, "%s: no other request decided", when)
	})
}

// A run that went cold (it ended, no retention) answers its principals' retries from the log, and so does it once
// a command made it hot again.
func TestARetryIsAnsweredItsOutcomeAcrossAColdRunAndItsRewarming(t *testing.T) {
	f := openEngineWith(t, vfs.NewMem(), newTestClock(), Options{Retention: -1})
	rs := sendRetried(t, f)
	adm := events.AdminPrincipal()
	var held []projections.Delegation
	f.eng.Read(func(s *projections.State) { held = s.Delegations(retryRun) })
	for _, d := range held { // a run holding a slot stays hot
		require.Nil(t, f.submit(as(adm, "", &DelegateSpawned{RunID: retryRun, SubID: d.SubID, PID: 7})).Rejected)
		require.Nil(t, f.submit(as(adm, "", &DelegateSettle{RunID: retryRun, SubID: d.SubID, Outcome: OutcomeOK,
			Text: "done"})).Rejected)
	}
	for _, run := range []string{retryRun, retryOther} {
		require.Nil(t, f.submit(as(adm, "", &RunTransition{RunID: run, To: "completed"})).Rejected)
	}
	f.submit(as(adm, "", &RunCreate{RunID: "later", Team: "t", Goal: "g", Cwd: "/w"}))
	f.eng.Read(func(s *projections.State) {
		require.True(t, s.IsCold(retryRun))
		require.True(t, s.IsCold(retryOther))
	})
	requireAnsweredAsFirst(t, f, rs, "cold")

	for _, run := range []string{retryRun, retryOther} {
		require.Nil(t, f.submit(as(adm, "", &RunTransition{RunID: run, To: "running"})).Rejected)
	}
	f.eng.Read(func(s *projections.State) {
		require.True(t, s.IsHot(retryRun))
		require.True(t, s.IsHot(retryOther))
	})
	requireAnsweredAsFirst(t, f, rs, "hot again")
}

// crewd restarted: from no snapshot, from one taken before the first attempts, and from one taken after them.
func TestARetryIsAnsweredItsOutcomeAfterARestart(t *testing.T) {
	for _, tc := range []struct {
		name          string
		before, after bool // a snapshot saved before the first attempts, after them
	}{
		{"no snapshot", false, false},
		{"snapshot before", true, false},
		{"snapshot after", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, clock := vfs.NewMem(), newTestClock()
			open := func(snapshot bool) *engineFixture {
				every := int64(-1)
				if snapshot {
					every = 1 // due at every group: Close saves the one in flight or due
				}
				return openEngineWith(t, fs, clock, Options{SnapshotEvery: every})
			}
			f := open(tc.before)
			f.seedRunAs("seed")
			f.close()
			f = open(tc.after)
			rs := sendRetried(t, f)
			f.close()
			f = open(false)
			switch {
			case tc.before || tc.after:
				require.NotZero(t, f.eng.LoadInfo().SnapshotPosition)
			default:
				require.Zero(t, f.eng.LoadInfo().SnapshotPosition)
			}
			requireAnsweredAsFirst(t, f, rs, "restarted")
			f.close()
			f = open(true)
			requireAnsweredAsFirst(t, f, rs, "restarted again")
		})
	}
}

// More commands than the log's index of recent outcomes holds came after the first attempts: their outcomes are
// read from the store.
func TestARetryIsAnsweredItsOutcomeOnceItLeftTheRecentIndex(t *testing.T) {
	fs, clock := vfs.NewMem(), newTestClock()
	l, err := eventlog.Open("db", &eventlog.Options{FS: fs, RecentOutcomes: 4})
	require.NoError(t, err)
	e, err := Open(l, Options{Clock: clock.Now, NewID: counterIDs(), ExpiryInterval: -1})
	require.NoError(t, err)
	f := &engineFixture{t: t, fs: fs, log: l, eng: e, clock: clock}
	t.Cleanup(f.close)
	rs := sendRetried(t, f)
	for i := 0; i < 8; i++ {
		r := f.submit(as(events.OrchestratorPrincipal(retryRun), "msg-"+string(rune('a'+i)),
			&MessageSend{RunID: retryRun, To: []string{"02_exec"}, Body: "x"}))
		require.Nil(t, r.Rejected)
	}
	requireAnsweredAsFirst(t, f, rs, "past the recent index")
}

// A request its caller refused before submitting it (Request.Refused: what the caller measures against the
// published state, which may have changed since a first attempt was recorded) is answered its command id's outcome
// when there is one, and the refusal, with nothing decided or recorded, when there is none.
func TestARefusedRequestIsAnsweredItsRecordedOutcome(t *testing.T) {
	reports := &groupReports{}
	f := openEngineWith(t, vfs.NewMem(), newTestClock(), Options{Observer: reports})
	rs := sendRetried(t, f)
	refusal := errors.New("refused by the caller")
	head, _ := f.log.Head()
	for _, r := range rs {
		req := r.req
		req.Refused = refusal
		again := f.submit(req)
		require.True(t, again.Replayed, "%s %q", r.req.Command.Kind(), r.req.CommandID)
		require.Equal(t, string(r.first.Result), string(again.Result))
		require.Equal(t, r.first.Rejected, again.Rejected)
		req.Command = r.other
		require.Equal(t, reusedID(), f.submit(req).Rejected)
	}
	fresh := as(events.OrchestratorPrincipal(retryRun), "fresh",
		&TaskCreate{RunID: retryRun, TaskID: "03_c", Role: "executor", Agent: "a", Title: "t", Cwd: "/w",
			StepID: "s"})
	for _, id := range []string{"fresh", ""} {
		req := fresh
		req.CommandID, req.Refused = id, refusal
		_, err := f.eng.Submit(context.Background(), req)
		require.ErrorIs(t, err, refusal, "%q", id)
	}
	after, _ := f.log.Head()
	require.Equal(t, head, after, "nothing decided or recorded")
	decided := f.submit(fresh)
	require.Nil(t, decided.Rejected)
	require.False(t, decided.Replayed, "the id the refusal did not record is decided once it is sent unrefused")
	reports.mu.Lock()
	defer reports.mu.Unlock()
	outcomes := map[CommandReport]int{}
	for _, g := range reports.cmds {
		for _, c := range g {
			outcomes[c]++
		}
	}
	require.Equal(t, 2, outcomes[CommandReport{Method: "task.create", Outcome: OutcomeRejected,
		Reason: reasonRefused}],
		"the refusals are reported as the caller's")
	require.Zero(t, outcomes[CommandReport{Method: "task.create", Outcome: OutcomeError}],
		"not as errors of the engine")
}
