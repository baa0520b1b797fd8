package commands

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// as builds principal p's request: its events carry p's actor.
func as(p events.Principal, id string, c Command) Request {
	return Request{Principal: p, CommandID: id, Actor: p.Actor(), Command: c}
}

// submit submits r and requires an answer (accepted or rejected).
func (f *engineFixture) submit(r Request) Reply {
	f.t.Helper()
	reply, err := f.eng.Submit(context.Background(), r)
	require.NoError(f.t, err)
	return reply
}

// seedRunAs creates, as the admin, a running run with one running task.
func (f *engineFixture) seedRunAs(run string) {
	f.t.Helper()
	adm := events.AdminPrincipal()
	for _, c := range []Command{
		&RunCreate{RunID: run, Team: "t", Goal: "g", Cwd: "/w"},
		&RunTransition{RunID: run, To: "running"},
		&TaskCreate{RunID: run, TaskID: "02_exec", Role: "executor", Agent: "a", Title: "exec", Cwd: "/w",
			StepID: "exec"},
		&TaskTransition{RunID: run, TaskID: "02_exec", To: "running"},
	} {
		r := f.submit(as(adm, "", c))
		require.Nil(f.t, r.Rejected)
	}
}

// Two orchestrators that name their ids alike each get their own command
// decided: run B gets its task, and neither sees the other's answer — also
// after a restart.
func TestEngineTwoOrchestratorsSameID(t *testing.T) {
	fs := vfs.NewMem()
	clock := newTestClock()
	f := openEngine(t, fs, clock, nil)
	f.seedRunAs("A")
	f.seedRunAs("B")
	create := func(run string) Request {
		return as(events.OrchestratorPrincipal(run), "create-task-1",
			&TaskCreate{RunID: run, TaskID: "03_" + run, Role: "executor", Agent: "a", Title: "t", Cwd: "/w",
				StepID: "s"})
	}
	a, b := f.submit(create("A")), f.submit(create("B"))
	require.Nil(t, a.Rejected)
	require.Nil(t, b.Rejected)
	require.False(t, b.Replayed, "run B's command is decided, not answered from run A's")
	require.NotEqual(t, a.Position, b.Position)
	f.eng.Read(func(s *projections.State) {
		_, ok := s.Task("B", "03_B")
		require.True(t, ok, "run B has its task")
	})

	f.close()
	f = openEngine(t, fs, clock, nil)
	for run, first := range map[string]Reply{"A": a, "B": b} {
		again := f.submit(create(run))
		require.True(t, again.Replayed, "a retry after a restart is answered from the record")
		require.Equal(t, first.Position, again.Position, "run %s gets its own answer", run)
		require.JSONEq(t, string(first.Result), string(again.Result))
	}
}

// A worker that pre-claims the ids its orchestrator will use for
// credential.revoke and run.transition {to: cancelled} claims nothing: both
// are decided.
func TestEngineWorkerCannotPreclaimOrchestratorIDs(t *testing.T) {
	f := openEngine(t, vfs.NewMem(), newTestClock(), nil)
	f.seedRunAs("R")
	orch := events.OrchestratorPrincipal("R")
	r := f.submit(as(orch, "issue-1", &CredentialIssue{RunID: "R", TaskID: "02_exec", Digest: fxDigest}))
	require.Nil(t, r.Rejected)

	wk := events.WorkerPrincipal("R", "02_exec")
	for _, id := range []string{"revoke-02_exec", "cancel-run"} {
		claim := f.submit(as(wk, id, &MessageSend{RunID: "R", FromTask: "02_exec", To: []string{ToParent},
			Body: "mine"}))
		require.False(t, claim.Replayed)
	}
	rev := f.submit(as(orch, "revoke-02_exec", &CredentialRevoke{RunID: "R", TaskID: "02_exec", Reason: "done"}))
	require.Nil(t, rev.Rejected)
	require.False(t, rev.Replayed)
	cancel := f.submit(as(orch, "cancel-run", &RunTransition{RunID: "R", To: "cancelled"}))
	require.Nil(t, cancel.Rejected)
	require.False(t, cancel.Replayed)
	f.eng.Read(func(s *projections.State) {
		c, ok := s.Credential("R", "02_exec")
		require.True(t, ok)
		require.True(t, c.Revoked, "the credential is revoked")
		run, _ := s.Run("R")
		require.Equal(t, projections.RunCancelled, run.Status)
	})
}

// A worker of run B reusing an id of run A gets its own command decided,
// never run A's recorded answer (its grandchildTaskRef).
func TestEngineCrossRunReuse(t *testing.T) {
	f := openEngine(t, vfs.NewMem(), newTestClock(), nil)
	f.seedRunAs("A")
	f.seedRunAs("B")
	ask := func(run string) Request {
		return as(events.WorkerPrincipal(run, "02_exec"), "d-1",
			&DelegateRequest{RunID: run, TaskID: "02_exec", Prompt: "p"})
	}
	a, b := f.submit(ask("A")), f.submit(ask("B"))
	require.Nil(t, a.Rejected)
	require.Nil(t, b.Rejected)
	require.False(t, b.Replayed)
	var ra, rb DelegateResult
	require.NoError(t, json.Unmarshal(a.Result, &ra))
	require.NoError(t, json.Unmarshal(b.Result, &rb))
	require.NotEqual(t, ra.GrandchildTaskRef, rb.GrandchildTaskRef)
	f.eng.Read(func(s *projections.State) {
		require.Len(t, s.Delegations("B"), 1, "run B's delegation is admitted")
	})
}

// The same principal reusing an id for another request is refused
// bad-params and nothing is recorded; the id keeps its first answer.
func TestEngineSameIDDifferentRequest(t *testing.T) {
	f := openEngine(t, vfs.NewMem(), newTestClock(), nil)
	f.seedRunAs("R")
	wk := events.WorkerPrincipal("R", "02_exec")
	first := f.submit(as(wk, "d-1", &DelegateRequest{RunID: "R", TaskID: "02_exec", Prompt: "p"}))
	require.Nil(t, first.Rejected)
	head := f.eng.Head()

	other := f.submit(as(wk, "d-1", &DelegateRequest{RunID: "R", TaskID: "02_exec", Prompt: "another prompt"}))
	require.Equal(t, &RejectedError{Code: CodeBadParams, Reason: "commandid-reused",
		Message: "commandId already used for a different request"}, other.Rejected)
	require.False(t, other.Replayed)
	require.Equal(t, head, f.eng.Head(), "nothing recorded")
	lh, _ := f.log.Head()
	require.Equal(t, head, lh)

	again := f.submit(as(wk, "d-1", &DelegateRequest{RunID: "R", TaskID: "02_exec", Prompt: "p"}))
	require.True(t, again.Replayed, "the first request's retry still gets its answer")
	require.JSONEq(t, string(first.Result), string(again.Result))

	_, err := f.eng.Submit(context.Background(),
		Request{CommandID: "x", Actor: admin, Command: &RunCreate{RunID: "Z"}})
	require.ErrorContains(t, err, "a command id needs a principal")
}

// delegate admits a delegation of timeoutSec seconds, as the worker wk of run R's task 02_exec, and returns its
// subId.
func (f *engineFixture) delegate(wk events.Principal, timeoutSec float64) string {
	f.t.Helper()
	adm := f.submit(as(wk, "d-1", &DelegateRequest{RunID: "R", TaskID: "02_exec", Prompt: "p",
		TimeoutSec: ptr(timeoutSec)}))
	require.Nil(f.t, adm.Rejected)
	var res DelegateResult
	require.NoError(f.t, json.Unmarshal(adm.Result, &res))
	return res.GrandchildTaskRef
}

// A worker that sends any command under the engine's expiry id of its own
// delegation does not stop it from expiring: the tick after deadline +
// grace expires it. An expiry refused as not yet due is not recorded.
func TestEngineExpiryIDsAreTheEngines(t *testing.T) {
	clock := newTestClock()
	f := openEngine(t, vfs.NewMem(), clock, nil)
	f.seedRunAs("R")
	wk := events.WorkerPrincipal("R", "02_exec")
	sub := f.delegate(wk, 60)
	expireID := "expire:R:" + sub

	// The worker claims the id, with the very command the clock would send
	// and with another one.
	claim := f.submit(as(wk, expireID, &DelegateExpire{RunID: "R", SubID: sub}))
	require.NotNil(t, claim.Rejected, "not due yet")
	claim2 := f.submit(as(wk, "ask-expire:R:q", &MessageSend{RunID: "R", FromTask: "02_exec", To: []string{ToParent},
		Body: "x"}))
	require.False(t, claim2.Replayed)

	// The engine's own expiry submitted before it is due is refused and not
	// recorded.
	engine := events.EnginePrincipal()
	early := f.submit(as(engine, expireID, &DelegateExpire{RunID: "R", SubID: sub}))
	require.NotNil(t, early.Rejected)
	_, err := f.log.Outcome(engine.Key(), expireID)
	require.ErrorIs(t, err, eventlog.ErrNotFound, "a not-yet-due expiry leaves no record")
	require.Zero(t, f.eng.Tick(context.Background()))

	var at int64
	f.eng.Read(func(s *projections.State) {
		d, _ := s.Delegation("R", sub)
		at = ExpiresAt(d, s.Config())
	})
	clock.ns.Store(at * int64(time.Millisecond))
	require.Equal(t, 1, f.eng.Tick(context.Background()), "the first tick at deadline + grace expires it")
	f.eng.Read(func(s *projections.State) {
		d, _ := s.Delegation("R", sub)
		require.Equal(t, projections.DelegationTimedOut, d.Status)
		require.Zero(t, s.SlotsHeld())
	})
	o, err := f.log.Outcome(engine.Key(), expireID)
	require.NoError(t, err)
	require.True(t, o.Accepted())

	// Already settled: the engine's expiry is a no-op and records nothing
	// more; the worker's claim still answers the worker alone.
	again := f.submit(as(engine, "expire:R:other", &DelegateExpire{RunID: "R", SubID: sub}))
	require.NotNil(t, again.Rejected)
	_, err = f.log.Outcome(engine.Key(), "expire:R:other")
	require.ErrorIs(t, err, eventlog.ErrNotFound)
	mine := f.submit(as(wk, expireID, &DelegateExpire{RunID: "R", SubID: sub}))
	require.True(t, mine.Replayed)
	require.Equal(t, claim.Rejected, mine.Rejected)
}

// A retry of a request whose JSON values are spaced otherwise is the same request: the params are parsed, and a
// value kept as JSON (a job's or a lease's tools, a call's args or result) is kept compact, as a
// message body is, rather than as the client spaced it.
func TestEngineRetrySpacedOtherwiseIsTheSameRequest(t *testing.T) {
	f := openEngine(t, vfs.NewMem(), newTestClock(), nil)
	f.seedRunAs("R")
	const tools = `[{"name":"read","label":"Read","description":"read","parameters":{"type":"object"},` +
		`"callable":"mgr:read","sourceInfo":{"path":"/t/read","source":"pi","scope":"user","origin":"package"}}]`
	create := func(params string) Request {
		c, err := ParseCommand("job.create", json.RawMessage(params),
			Caller{Role: events.RoleOrchestrator, RunID: "R"})
		require.NoError(t, err)
		c.(*JobCreate).NonceDigest = SecretDigest("nonce")
		return as(events.OrchestratorPrincipal("R"), "j-1", c)
	}
	first := f.submit(create(`{"jobId":"J","taskId":"02_exec","tools":` + tools + `}`))
	require.Nil(t, first.Rejected)
	spaced := strings.NewReplacer(`,"`, `, "`, `":`, `": `, `[{`, `[ {`).Replace(tools)
	again := f.submit(create(`{"jobId":"J","taskId":"02_exec","tools":` + spaced + `}`))
	require.Nil(t, again.Rejected)
	require.True(t, again.Replayed, "the first request's retry gets its answer")
	require.JSONEq(t, string(first.Result), string(again.Result))
}
