package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/client"
	"github.com/crewlog/crewlog/broker/wire"
)

// TestGoldenOverSocket runs the golden scenarios of D§12 (GS-01 … GS-20, with SPEC §7's answers) against real
// crewd processes over the socket: each fixture is set up with the admin and orchestrator credentials, then the
// test acts as the worker or orchestrator the scenario names and checks the answer (result, or code and
// message) and the state that follows through the query methods. commands/testdata/scenarios/gs-*.txt are the
// oracle for codes, reasons, messages and result shapes.
func TestGoldenOverSocket(t *testing.T) {
	pool := newDaemonPool(t)
	for _, gs := range []struct {
		name string
		run  func(*testing.T, *daemonPool)
	}{
		{"GS-01-capability-disabled", gs01},
		{"GS-02-credential-and-params", gs02},
		{"GS-03-happy-path-unmetered", gs03},
		{"GS-04-metered-admission", gs04},
		{"GS-05-budget-insufficient", gs05},
		{"GS-06-no-refund", gs06},
		{"GS-07-unlimited-budget", gs07},
		{"GS-08-depth-gate", gs08},
		{"GS-09-slots-exhausted", gs09},
		{"GS-10-parent-not-running", gs10},
		{"GS-11-role-model-timeout-trust", gs11},
		{"GS-12-workspace-conflict", gs12},
		{"GS-13-grandchild-timeout", gs13},
		{"GS-14-cancellation-with-run", gs14},
		{"GS-15-no-run-lock", gs15},
		{"GS-16-spawn-failure", gs16},
		{"GS-17-ask-park-resolve", gs17},
		{"GS-18-replay", gs18},
		{"GS-19-handshake-framing", gs19},
		{"GS-20-restart-and-revocation", gs20},
	} {
		t.Run(gs.name, func(t *testing.T) { gs.run(t, pool) })
	}
}

// GS-01: nesting off → policy-disabled; the only event is delegate.rejected without a subId; nothing else changes.
func gs01(t *testing.T, pool *daemonPool) {
	s := newScenario(t, pool.get(t, "nesting-off"), "gs01", nil)
	w := s.worker(P)
	seq := s.head()
	s.refused(w, "delegate.request", map[string]any{"prompt": "x"}, wire.CodePolicyDisabled,
		"delegate is disabled: nesting.enabled=false (fail-closed default; delegate.rejected recorded in events.jsonl)")
	evs := s.appended(seq, "delegate.rejected")
	fields(t, evs[0].Data, `{"taskId":"02_exec","reason":"nesting-disabled",
		"message":"delegate rejected: governed nesting is disabled (nesting.enabled=false, the fail-closed default; enable it in USER confi"}`)
	lacks(t, evs[0].Data, "subId")
	requireMessage(t, evs[0])
	fields(t, evs[0].Data["policy"].(map[string]any), `{"nestingEnabled":false,"held":0,"capacity":2}`)

	s.requireSlots(2)
	tasks := s.tasks()
	require.Len(t, tasks, 1, "no shadow task")
	fields(t, tasks[P], `{"status":"running","stepId":"exec","model":"anthropic/m1"}`)
	lacks(t, tasks[P], "allocation")
	require.Empty(t, s.ledger())
	require.Empty(t, s.delegations())
}

// isoMillis matches an ISO-8601 UTC time with milliseconds, as JavaScript's toISOString writes it.
const isoMillis = `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`

// requireMessage checks a delegate.* TeamEvent's message: "<type>: <JSON data>", the JSON cut to at most 200
// characters (pi-crew's recordDelegateEvent cuts the JSON, then puts the type before it).
func requireMessage(t *testing.T, ev teamEvent) {
	t.Helper()
	prefix := ev.Type + ": "
	require.True(t, strings.HasPrefix(ev.Message, prefix+"{"), "message %q", ev.Message)
	require.LessOrEqual(t, len([]rune(strings.TrimPrefix(ev.Message, prefix))), 200, "message %q", ev.Message)
}

// GS-02: credential and parameter rejections append no event and change nothing.
func gs02(t *testing.T, pool *daemonPool) {
	s := newScenario(t, pool.get(t, "fixture"), "gs02", nil)
	w := s.worker(P)
	seq := s.head()

	// (a) An orchestrator credential is not task-scoped; nor is the admin's.
	s.refused(s.orch, "delegate.request", map[string]any{"prompt": "x"}, wire.CodeForbidden,
		"delegate requires a task-scoped token; re-dispatch with PI_CREW_BROKER_TASK_ID")
	s.refused(s.admin, "delegate.request", map[string]any{"prompt": "x", "runId": s.runID}, wire.CodeForbidden, "")

	// (b) A bare-runId credential (no task) cannot even hello: crewlog has no legacy run-wide worker token.
	s.dialRefused(client.Hello{RunID: s.runID, Token: s.workers[P].Token}, wire.CodeAuth, wire.MsgHelloRejected)

	// (c) Bad params: bad-params "delegate.request: invalid params: …", the connection stays.
	for _, c := range []struct {
		params any
		msg    string
	}{
		{map[string]any{"prompt": ""}, "prompt must be a non-empty string of at most 32768 chars"},
		{map[string]any{"prompt": "x", "budgetTokens": -5}, "budgetTokens must be an integer in 0..100000000"},
		{map[string]any{"prompt": "x", "maxTurns": 1.5}, "maxTurns must be an integer"},
		{map[string]any{"prompt": 42}, "prompt must be a string"},
		{map[string]any{"prompt": "x", "description": ""}, "description must be 1..512 chars"},
		{map[string]any{"prompt": "x", "timeoutSec": "soon"}, "timeoutSec must be a finite number"},
		{map[string]any{"prompt": "x", "budgetTokens": 100000001}, "budgetTokens must be an integer in 0..100000000"},
		{nil, "prompt must be a string"},
	} {
		s.refused(w, "delegate.request", c.params, wire.CodeBadParams, "delegate.request: invalid params: "+c.msg)
	}
	s.must(w, "ping", nil, nil)

	// (d) A run the broker does not know: refused at the hello (auth), before any method.
	s.dialRefused(client.Hello{RunID: "gs02-missing", TaskID: P, Token: s.workers[P].Token}, wire.CodeAuth, wire.MsgHelloRejected)

	s.nothingAppended(seq)
	s.requireSlots(2)
	tasks := s.tasks()
	require.Len(t, tasks, 1)
	fields(t, tasks[P], `{"status":"running"}`)
	lacks(t, tasks[P], "allocation")
	require.Empty(t, s.delegations())
}

// GS-03: the happy path, unmetered, from admission through spawn to the fenced result in P's inbox.
func gs03(t *testing.T, pool *daemonPool) {
	d := pool.get(t, "fixture")
	s := newScenario(t, d, "gs03", nil)
	pushes := make(chan wire.Event, 16)
	w, err := client.Dial(s.ctx, d.socket, s.workers[P], &client.Options{OnMailbox: func(ev wire.Event) {
		select {
		case pushes <- ev:
		default:
		}
	}})
	require.NoError(t, err)
	t.Cleanup(func() { w.Close() })

	seq := s.head()
	adm := s.delegate(w, map[string]any{"prompt": "find X", "description": "search"})
	require.Equal(t, 2, adm.ChildDepth)
	require.Equal(t, float64(900), adm.TimeoutSec)
	S := adm.GrandchildTaskRef
	evs := s.appended(seq, "delegate.requested", "delegate.admitted")
	fields(t, evs[0].Data, fmt.Sprintf(`{"taskId":%q,"subId":%q,"role":"explorer"}`, P, S))
	fields(t, evs[1].Data, fmt.Sprintf(`{"taskId":%q,"subId":%q,"childDepth":2,"role":"explorer","unmetered":true,
		"model":"anthropic/m1","timeoutSec":900,"cwd":"/w","title":"delegate: search"}`, P, S))
	lacks(t, evs[1].Data, "reservedTokens")
	require.Equal(t, P, evs[1].TaskID, "delegate events carry the parent task")

	shadow := s.task(S)
	fields(t, shadow, fmt.Sprintf(`{"id":%q,"agent":"delegate","role":"explorer","title":"delegate: search",
		"status":"queued","cwd":"/w","dependsOn":[],"depth":2,"model":"anthropic/m1"}`, S))
	lacks(t, shadow, "stepId")
	s.requireSlots(2, S)

	// The grandchild's credential: childDepth 2 < maxDepth 4.
	s.issue(S)
	gc := s.worker(S)
	require.Equal(t, s.runID, gc.Ack().Run)

	fields(t, s.obj(s.orch, "delegate.spawned", map[string]any{"subId": S, "pid": 4242}),
		fmt.Sprintf(`{"ok":true,"status":"running","subId":%q}`, S))
	fields(t, s.task(S), `{"status":"running"}`)

	seq = s.head()
	res := s.settle(S, "ok", "X is in a.go:12", nil)
	fields(t, res, fmt.Sprintf(`{"ok":true,"subId":%q,"status":"completed","to":%q,"rerouted":false,"chargedTokens":0}`, S, P))
	msgID := res["messageId"].(string)
	evs = s.appended(seq, "mailbox.appended", "delegate.completed")
	fields(t, evs[1].Data, fmt.Sprintf(`{"taskId":%q,"subId":%q,"ok":true,"messageId":%q}`, P, S, msgID))

	body := fence(S, "ok", "X is in a.go:12")
	select {
	case ev := <-pushes:
		require.Equal(t, wire.EventMailboxMessage, ev.Name)
		require.JSONEq(t, fmt.Sprintf(`{"id":%q,"from":"delegate:%s","to":%q,"body":%q,"kind":"response","priority":"normal"}`,
			msgID, S, P, body), string(ev.Data))
	case <-s.ctx.Done():
		t.Fatal("the result was not pushed to P's connection")
	}
	box := s.inbox(w)
	require.Len(t, box.Messages, 1)
	m := box.Messages[0]
	require.Equal(t, msgID, m.ID)
	require.Equal(t, "delegate:"+S, m.From)
	require.Equal(t, P, m.To)
	require.Equal(t, "response", m.Kind)
	require.Equal(t, body, m.Body)
	fields(t, m.Data, fmt.Sprintf(`{"subId":%q,"ok":true,"timedOut":false}`, S))
	require.Regexp(t, isoMillis, m.CreatedAt)
	for _, ev := range s.since(w, 0) {
		require.Regexp(t, isoMillis, ev.Time, "%s", ev.Type)
		require.Equal(t, s.runID, ev.RunID)
	}

	fields(t, s.delegation(S), fmt.Sprintf(`{"status":"completed","ok":true,"pid":4242,"messageId":%q,"metered":false,
		"reservedTokens":0,"model":"anthropic/m1","depth":2,"parentTaskId":%q}`, msgID, P))
	fields(t, s.task(S), `{"status":"completed"}`)
	s.requireSlots(2)
	fields(t, s.task(P), `{"status":"running"}`)
	lacks(t, s.task(P), "allocation")
	require.Empty(t, s.ledger())
}

// GS-04: a run budget seeds P's grant; the reservation is the spend.
func gs04(t *testing.T, pool *daemonPool) {
	s := newScenario(t, pool.get(t, "fixture"), "gs04", map[string]any{"budgetTotal": 100000})
	w := s.worker(P)
	seq := s.head()
	adm := s.delegate(w, map[string]any{"prompt": "find X", "budgetTokens": 20000})
	S := adm.GrandchildTaskRef
	require.Equal(t, 2, adm.ChildDepth)
	evs := s.appended(seq, "delegate.requested", "delegate.admitted", "budget.reserved")
	fields(t, evs[1].Data, fmt.Sprintf(`{"subId":%q,"childDepth":2,"role":"explorer","reservedTokens":20000}`, S))
	lacks(t, evs[1].Data, "unmetered")
	fields(t, evs[2].Data, fmt.Sprintf(`{"taskId":%q,"subId":%q,"tokens":20000,"grantedTokens":100000}`, P, S))

	acc := s.ledger()
	require.Len(t, acc, 1)
	fields(t, acc[0], fmt.Sprintf(`{"runId":"gs04","taskId":%q,"tokensGranted":100000,"tokensSpent":20000,"reserved":20000,"charged":0}`, P))
	res := acc[0]["reservations"].([]any)
	require.Len(t, res, 1)
	fields(t, res[0].(map[string]any), fmt.Sprintf(`{"subId":%q,"tokens":20000}`, S))
	fields(t, s.task(P), `{"allocation":{"tokensGranted":100000,"tokensSpent":20000}}`)
	fields(t, s.delegation(S), `{"metered":true,"reservedTokens":20000,"status":"queued"}`)
}

// GS-05: a request above P's remaining allocation is denied; nothing changes.
func gs05(t *testing.T, pool *daemonPool) {
	s := newScenario(t, pool.get(t, "fixture"), "gs05", map[string]any{"budgetTotal": 100000})
	w := s.worker(P)
	// P.allocation = {100000, 90000}: an earlier admission reserved 90000.
	earlier := s.delegate(w, map[string]any{"prompt": "earlier", "budgetTokens": 90000}).GrandchildTaskRef
	fields(t, s.task(P), `{"allocation":{"tokensGranted":100000,"tokensSpent":90000}}`)

	seq := s.head()
	msg := "delegate rejected: requested budget 20000 tokens exceeds parent task '02_exec' remaining allocation 10000 (100000 granted - 90000 spent)"
	s.refused(w, "delegate.request", map[string]any{"prompt": "find X", "budgetTokens": 20000}, wire.CodePolicyDenied, msg)
	evs := s.appended(seq, "delegate.requested", "delegate.rejected")
	sub := evs[0].Data["subId"].(string)
	fields(t, evs[1].Data, fmt.Sprintf(`{"subId":%q,"reason":"budget-insufficient","message":%q}`, sub, cut(msg, 120)))
	fields(t, s.task(P), `{"allocation":{"tokensGranted":100000,"tokensSpent":90000}}`)
	s.requireSlots(2, earlier)
	require.Len(t, s.delegations(), 1, "no shadow for the rejected request")
	require.NotContains(t, s.tasks(), sub)

	// Exactly the remainder is admitted (the check is budgetTokens > granted - spent).
	s.delegate(w, map[string]any{"prompt": "find X", "budgetTokens": 10000})
	acc := s.ledger()
	require.Len(t, acc, 1)
	fields(t, acc[0], `{"tokensGranted":100000,"tokensSpent":100000,"reserved":100000}`)
}

// GS-06: no refund at settlement; spend only grows; the grant is write-once; usage above the reservation is
// charged.
func gs06(t *testing.T, pool *daemonPool) {
	s := newScenario(t, pool.get(t, "fixture"), "gs06", map[string]any{"budgetTotal": 100000})
	w := s.worker(P)
	S1 := s.delegate(w, map[string]any{"prompt": "find X", "budgetTokens": 20000}).GrandchildTaskRef
	s.must(s.orch, "delegate.spawned", map[string]any{"subId": S1, "pid": 101}, nil)
	seq := s.head()
	res := s.settle(S1, "ok", "done", map[string]any{"usageTokens": 5000})
	fields(t, res, `{"status":"completed","chargedTokens":0,"rerouted":false}`)
	evs := s.appended(seq, "mailbox.appended", "delegate.completed") // no delegate.rolled_up, no refund
	fields(t, evs[1].Data, `{"ok":true,"usageTokens":5000}`)
	acc := s.ledger()
	require.Len(t, acc, 1)
	fields(t, acc[0], `{"tokensGranted":100000,"tokensSpent":20000,"reserved":20000,"charged":0}`)

	S3 := s.delegate(w, map[string]any{"prompt": "find Y", "budgetTokens": 80000}).GrandchildTaskRef
	fields(t, s.task(P), `{"allocation":{"tokensGranted":100000,"tokensSpent":100000}}`)

	s.refused(w, "delegate.request", map[string]any{"prompt": "find Z", "budgetTokens": 1}, wire.CodePolicyDenied,
		"delegate rejected: requested budget 1 tokens exceeds parent task '02_exec' remaining allocation 0 (100000 granted - 100000 spent)")
	fields(t, s.task(P), `{"allocation":{"tokensGranted":100000,"tokensSpent":100000}}`)

	// Usage above the reservation charges the excess (SPEC §4.2): spend grows, the grant does not.
	seq = s.head()
	res = s.settle(S3, "ok", "done", map[string]any{"usageTokens": 85000})
	fields(t, res, `{"status":"completed","chargedTokens":5000}`)
	evs = s.appended(seq, "mailbox.appended", "budget.charged", "delegate.completed")
	fields(t, evs[1].Data, fmt.Sprintf(`{"taskId":%q,"subId":%q,"tokens":5000,"usageTokens":85000,"reservedTokens":80000}`, P, S3))
	acc = s.ledger()
	require.Len(t, acc, 1)
	fields(t, acc[0], `{"tokensGranted":100000,"tokensSpent":105000,"reserved":100000,"charged":5000}`)
	fields(t, s.task(P), `{"allocation":{"tokensGranted":100000,"tokensSpent":105000}}`)
}

// GS-07: an unlimited run is never metered; with --unmetered-delegates deny an unmetered admission is refused.
func gs07(t *testing.T, pool *daemonPool) {
	s := newScenario(t, pool.get(t, "fixture"), "gs07", map[string]any{"budgetTotal": 100000, "budgetUnlimited": true})
	w := s.worker(P)
	seq := s.head()
	S := s.delegate(w, map[string]any{"prompt": "find X", "budgetTokens": 20000}).GrandchildTaskRef
	evs := s.appended(seq, "delegate.requested", "delegate.admitted")
	fields(t, evs[1].Data, `{"unmetered":true}`)
	lacks(t, evs[1].Data, "reservedTokens")
	require.Empty(t, s.ledger())
	lacks(t, s.task(P), "allocation")
	fields(t, s.delegation(S), `{"metered":false,"reservedTokens":0}`)

	s = newScenario(t, pool.get(t, "unmetered-deny"), "gs07-deny", nil)
	w = s.worker(P)
	seq = s.head()
	msg := "delegate rejected: the run has no budget to meter this delegation and unmeteredDelegates is deny"
	s.refused(w, "delegate.request", map[string]any{"prompt": "find X", "budgetTokens": 20000}, wire.CodePolicyDenied, msg)
	evs = s.appended(seq, "delegate.requested", "delegate.rejected")
	fields(t, evs[1].Data, fmt.Sprintf(`{"reason":"unmetered-denied","message":%q}`, msg))
	s.requireSlots(2)
}

// GS-08: the depth gate and credential containment, along a chain built with real requests.
func gs08(t *testing.T, pool *daemonPool) {
	s := newScenario(t, pool.get(t, "four-slots"), "gs08", nil)
	w := s.worker(P)
	S1 := s.delegate(w, map[string]any{"prompt": "level 2"})
	require.Equal(t, 2, S1.ChildDepth)
	s.issue(S1.GrandchildTaskRef)
	s.must(s.orch, "delegate.spawned", map[string]any{"subId": S1.GrandchildTaskRef, "pid": 101}, nil)

	S2 := s.delegate(s.worker(S1.GrandchildTaskRef), map[string]any{"prompt": "level 3"})
	require.Equal(t, 3, S2.ChildDepth)
	s.issue(S2.GrandchildTaskRef)
	s.must(s.orch, "delegate.spawned", map[string]any{"subId": S2.GrandchildTaskRef, "pid": 102}, nil)

	// (a) The parent is the shadow S2 (depth 3, running, its own credential): childDepth 4 <= 4, admitted.
	seq := s.head()
	S3 := s.delegate(s.worker(S2.GrandchildTaskRef), map[string]any{"prompt": "level 4"})
	require.Equal(t, 4, S3.ChildDepth)
	evs := s.appended(seq, "delegate.requested", "delegate.admitted")
	require.Equal(t, S2.GrandchildTaskRef, evs[1].TaskID)
	fields(t, evs[1].Data, fmt.Sprintf(`{"taskId":%q,"subId":%q,"childDepth":4,"parentRole":"explorer"}`,
		S2.GrandchildTaskRef, S3.GrandchildTaskRef))
	fields(t, s.task(S3.GrandchildTaskRef), `{"depth":4,"status":"queued","agent":"delegate"}`)
	// ... but a grandchild at the depth limit gets no credential.
	seq = s.head()
	s.refused(s.orch, "credential.issue", map[string]any{"taskId": S3.GrandchildTaskRef}, wire.CodeForbidden,
		fmt.Sprintf("credential.issue: task %s is at depth 4 and maxDepth is 4; a grandchild at the depth limit cannot delegate",
			S3.GrandchildTaskRef))
	s.nothingAppended(seq)

	// (b) A depth-4 parent is depth-exceeded. The depth-4 shadow has no credential, so the parent is a task the
	// orchestrator created at depth 4 (its credential is not depth-gated: it is not a shadow).
	s.addTask("05_deep", "executor", "/w/deep", map[string]any{"depth": 4})
	seq = s.head()
	msg := "delegate rejected: spawn depth 5 exceeds maxDepth 4 (parent task '05_deep' is at depth 4)"
	s.refused(s.worker("05_deep"), "delegate.request", map[string]any{"prompt": "level 5"}, wire.CodePolicyDenied, msg)
	evs = s.appended(seq, "delegate.requested", "delegate.rejected")
	fields(t, evs[1].Data, fmt.Sprintf(`{"taskId":"05_deep","reason":"depth-exceeded","message":%q}`, msg))
	s.requireSlots(4, S1.GrandchildTaskRef, S2.GrandchildTaskRef, S3.GrandchildTaskRef)

	// (c) With maxDepth 2, a depth-1 worker's child (depth 2) is admitted and gets no credential; P's own
	// credential (a workflow task, not a shadow) is never depth-gated.
	s = newScenario(t, pool.get(t, "max-depth-2"), "gs08c", nil)
	adm := s.delegate(s.worker(P), map[string]any{"prompt": "x"})
	require.Equal(t, 2, adm.ChildDepth)
	s.refused(s.orch, "credential.issue", map[string]any{"taskId": adm.GrandchildTaskRef}, wire.CodeForbidden,
		fmt.Sprintf("credential.issue: task %s is at depth 2 and maxDepth is 2; a grandchild at the depth limit cannot delegate",
			adm.GrandchildTaskRef))
	s.issue(P)
}

// GS-09: slots exhausted fail fast (nothing queued), and a freed slot admits again; never 3 in flight.
func gs09(t *testing.T, pool *daemonPool) {
	s := newScenario(t, pool.get(t, "fixture"), "gs09", nil)
	w := s.worker(P)
	S1 := s.delegate(w, map[string]any{"prompt": "one"}).GrandchildTaskRef
	S2 := s.delegate(w, map[string]any{"prompt": "two"}).GrandchildTaskRef
	s.requireSlots(2, S1, S2)

	seq := s.head()
	msg := "delegate rejected: nested spawn budget exhausted; 2/2 in flight"
	s.refused(w, "delegate.request", map[string]any{"prompt": "three"}, wire.CodePolicyDenied, msg)
	evs := s.appended(seq, "delegate.requested", "delegate.rejected")
	fields(t, evs[1].Data, fmt.Sprintf(`{"reason":"slots-exhausted","message":%q}`, msg))
	fields(t, evs[1].Data["policy"].(map[string]any), `{"held":2,"capacity":2}`)
	requireMessage(t, evs[0])
	requireMessage(t, evs[1])
	require.Len(t, s.delegations(), 2, "nothing queued")
	require.Len(t, s.tasks(), 3, "P and two shadows")
	s.requireSlots(2, S1, S2)

	s.settle(S1, "ok", "one done", nil)
	s.requireSlots(2, S2)
	S4 := s.delegate(w, map[string]any{"prompt": "four"}).GrandchildTaskRef
	s.requireSlots(2, S2, S4)
}

// GS-10: a parent that is not running is refused parent-not-running (bad-params); a missing one cannot even
// get a credential.
func gs10(t *testing.T, pool *daemonPool) {
	s := newScenario(t, pool.get(t, "fixture"), "gs10", nil)
	w := s.worker(P)
	notRunning := func(w *client.Client, task, status string) {
		t.Helper()
		seq := s.head()
		s.refused(w, "delegate.request", map[string]any{"prompt": "x"}, wire.CodeBadParams,
			fmt.Sprintf("delegate: parent task '%s' is %s, not running", task, status))
		evs := s.appended(seq, "delegate.requested", "delegate.rejected")
		fields(t, evs[1].Data, fmt.Sprintf(`{"taskId":%q,"subId":%q,"reason":"parent-not-running","message":"task is %s"}`,
			task, evs[0].Data["subId"], status))
	}

	// Waiting: P parks on a question (GS-17), then asks for a grandchild.
	var ask struct {
		QuestionID string `json:"questionId"`
	}
	s.must(w, "wait.request", map[string]any{"question": "Which API?"}, &ask)
	notRunning(w, P, "waiting")
	s.requireSlots(2)
	s.must(w, "wait.resolve", map[string]any{"questionId": ask.QuestionID}, nil)

	// Queued: created, credential issued, not started.
	s.must(s.orch, "task.create", map[string]any{"taskId": "03_next", "role": "executor", "agent": "executor",
		"title": "next", "cwd": "/w", "dependsOn": []string{P}, "stepId": "next"}, nil)
	s.issue("03_next")
	notRunning(s.worker("03_next"), "03_next", "queued")

	// Cancelled, completed: a terminal task's credential ends (SPEC §5), so its worker cannot ask at all — its
	// open connection is cut with stale-token and a new hello is refused; the engine's parent-not-running for a
	// terminal parent is pinned by the commands scenarios.
	s.addTask("04_gone", "executor", "/w/4", nil)
	w4 := s.worker("04_gone")
	seq := s.head()
	s.must(s.orch, "task.transition", map[string]any{"taskId": "04_gone", "to": "cancelled", "reason": "user"}, nil)
	s.ended(w4, wire.CodeStaleToken, wire.MsgTaskTerminal)
	s.dialRefused(s.workers["04_gone"], wire.CodeStaleToken, wire.MsgTaskTerminal)
	s.must(s.orch, "task.transition", map[string]any{"taskId": P, "to": "completed"}, nil)
	s.ended(w, wire.CodeStaleToken, wire.MsgTaskTerminal)
	s.appended(seq, "task.cancelled", "task.completed")

	// Missing: the broker issues no credential for a task that does not exist, and refuses a hello naming one.
	seq = s.head()
	s.refused(s.orch, "credential.issue", map[string]any{"taskId": "09_gone"}, wire.CodeNoTask, "")
	s.dialRefused(client.Hello{RunID: s.runID, TaskID: "09_gone", Token: s.workers[P].Token}, wire.CodeAuth, wire.MsgHelloRejected)
	s.nothingAppended(seq)
	s.requireSlots(2)
	require.Empty(t, s.delegations())
}

// GS-11: role, model, trust and timeout gates; every denial is recorded and answered policy-denied.
func gs11(t *testing.T, pool *daemonPool) {
	s := newScenario(t, pool.get(t, "fixture"), "gs11", nil)
	w := s.worker(P)
	denied := func(params map[string]any, reason, role, msg string) {
		t.Helper()
		seq := s.head()
		s.refused(w, "delegate.request", params, wire.CodePolicyDenied, msg)
		evs := s.appended(seq, "delegate.requested", "delegate.rejected")
		fields(t, evs[0].Data, fmt.Sprintf(`{"role":%q}`, role))
		fields(t, evs[1].Data, fmt.Sprintf(`{"reason":%q,"message":%q}`, reason, msg))
	}
	admittedWith := func(params map[string]any, model string, timeoutSec float64) {
		t.Helper()
		adm := s.delegate(w, params)
		require.Equal(t, timeoutSec, adm.TimeoutSec)
		fields(t, s.delegation(adm.GrandchildTaskRef), fmt.Sprintf(`{"model":%q,"timeoutSec":%v}`, model, timeoutSec))
		fields(t, s.task(adm.GrandchildTaskRef), fmt.Sprintf(`{"model":%q}`, model))
		s.settle(adm.GrandchildTaskRef, "ok", "done", nil)
	}

	// (a) role.
	denied(map[string]any{"prompt": "x", "role": "reviewer"}, "role-denied", "reviewer",
		"delegate rejected: requested grandchild role 'reviewer' is not one of explorer/analyst/executor")
	// (b) a model outside the catalog.
	denied(map[string]any{"prompt": "x", "model": "openai/gpt-x"}, "model-invalid", "explorer",
		"delegate rejected: model 'openai/gpt-x' is not in the resolved model catalog")
	// (d) no model: admitted, the grandchild runs P's model; a catalog model (trimmed) is used as asked.
	admittedWith(map[string]any{"prompt": "x"}, "anthropic/m1", 900)
	admittedWith(map[string]any{"prompt": "x", "model": " openai/m2 "}, "openai/m2", 900)
	// (e) trust is not a param: a request cannot mark itself untrusted (extra keys are ignored).
	admittedWith(map[string]any{"prompt": "x", "nestingTrustedEscalation": false, "untrusted": true}, "anthropic/m1", 900)
	// (f) timeouts outside 1..86400; the bounds themselves are valid.
	denied(map[string]any{"prompt": "x", "timeoutSec": 0}, "timeout-invalid", "explorer",
		"delegate rejected: timeoutSec 0 is outside 1..86400 (default 900)")
	denied(map[string]any{"prompt": "x", "timeoutSec": 100000}, "timeout-invalid", "explorer",
		"delegate rejected: timeoutSec 100000 is outside 1..86400 (default 900)")
	admittedWith(map[string]any{"prompt": "x", "timeoutSec": 86400}, "anthropic/m1", 86400)
	s.requireSlots(2)

	// (c) An empty catalog denies every explicit model, even P's own; no model is not checked.
	s = newScenario(t, pool.get(t, "empty-catalog"), "gs11c", nil)
	w = s.worker(P)
	denied(map[string]any{"prompt": "x", "model": "anthropic/m1"}, "model-invalid", "explorer",
		"delegate rejected: model 'anthropic/m1' is not in the resolved model catalog")
	admittedWith(map[string]any{"prompt": "x"}, "anthropic/m1", 900)
}

// GS-12: a write-capable grandchild in the exact cwd of another running executor-class task is refused unless
// serializeOnPathOverlap is on.
func gs12(t *testing.T, pool *daemonPool) {
	conflict := "delegate rejected: parent task '02_exec' cwd overlaps 1 in-flight executor(s) and limits.serializeOnPathOverlap is off — use a read-only grandchild role (explorer/analyst) or enable serialization"

	s := newScenario(t, pool.get(t, "fixture"), "gs12", nil)
	s.addTask("03_test", "test-engineer", "/w", map[string]any{"stepId": "test"})
	w := s.worker(P)
	// (a)
	seq := s.head()
	s.refused(w, "delegate.request", map[string]any{"prompt": "x", "role": "executor"}, wire.CodePolicyDenied, conflict)
	evs := s.appended(seq, "delegate.requested", "delegate.rejected")
	fields(t, evs[1].Data, fmt.Sprintf(`{"reason":"workspace-conflict","message":%q}`, cut(conflict, 120)))
	fields(t, evs[1].Data["policy"].(map[string]any), `{"overlapping":1,"serializeOnPathOverlap":false}`)
	// (b) A read-only grandchild never conflicts.
	s.delegate(w, map[string]any{"prompt": "x", "role": "explorer"})
	s.drain()

	// (d) 03_test runs in another worktree (its execution cwd is /w/wt2): the comparison is exact, admitted. A
	// running executor grandchild at /w is then itself an in-flight executor: a second one conflicts with it.
	s = newScenario(t, pool.get(t, "fixture"), "gs12d", nil)
	s.must(s.orch, "task.create", map[string]any{"taskId": "03_test", "role": "test-engineer", "agent": "tester",
		"title": "test", "cwd": "/w", "stepId": "test"}, nil)
	s.must(s.orch, "task.transition", map[string]any{"taskId": "03_test", "to": "running", "cwd": "/w/wt2"}, nil)
	fields(t, s.task("03_test"), `{"cwd":"/w/wt2"}`)
	w = s.worker(P)
	adm := s.delegate(w, map[string]any{"prompt": "x", "role": "executor"})
	s.must(s.orch, "delegate.spawned", map[string]any{"subId": adm.GrandchildTaskRef, "pid": 101}, nil)
	s.refused(w, "delegate.request", map[string]any{"prompt": "y", "role": "executor"}, wire.CodePolicyDenied, conflict)
	s.drain()

	// (c) serializeOnPathOverlap on: the executor is admitted next to 03_test.
	s = newScenario(t, pool.get(t, "serialize"), "gs12c", nil)
	s.addTask("03_test", "test-engineer", "/w", map[string]any{"stepId": "test"})
	seq = s.head()
	s.delegate(s.worker(P), map[string]any{"prompt": "x", "role": "executor"})
	evs = s.appended(seq, "delegate.requested", "delegate.admitted")
	fields(t, evs[1].Data, `{"role":"executor"}`)
	fields(t, evs[1].Data["policy"].(map[string]any), `{"serializeOnPathOverlap":true}`)
}

// GS-13: a timed-out grandchild, reported by the runtime or expired by the engine clock: delegate.timed_out, the
// delegation timed_out, its shadow failed, the "(timed out)" fence in P's inbox, the slot freed, the reservation
// still spent.
func gs13(t *testing.T, pool *daemonPool) {
	// The runtime aborts the grandchild at its timeout and settles timed_out (on the fixture's daemon, whose 30 s
	// grace keeps the engine clock out of the way).
	s := newScenario(t, pool.get(t, "fixture"), "gs13", map[string]any{"budgetTotal": 100000})
	w := s.worker(P)
	adm := s.delegate(w, map[string]any{"prompt": "slow", "timeoutSec": 5, "budgetTokens": 1000})
	require.Equal(t, float64(5), adm.TimeoutSec)
	S := adm.GrandchildTaskRef
	s.must(s.orch, "delegate.spawned", map[string]any{"subId": S, "pid": 101}, nil)
	seq := s.head()
	res := s.settle(S, "timed_out", "[delegate timed out]", nil)
	fields(t, res, fmt.Sprintf(`{"ok":true,"subId":%q,"status":"timed_out","to":%q,"rerouted":false,"chargedTokens":0}`, S, P))
	evs := s.appended(seq, "mailbox.appended", "delegate.timed_out")
	fields(t, evs[1].Data, fmt.Sprintf(`{"subId":%q,"ok":false}`, S))
	lacks(t, evs[1].Data, "expired")
	fields(t, s.delegation(S), `{"status":"timed_out","reservedTokens":1000,"pid":101}`)
	fields(t, s.task(S), `{"status":"failed"}`)
	box := s.inbox(w)
	require.Len(t, box.Messages, 1)
	require.Equal(t, fence(S, "timed out", "[delegate timed out]"), box.Messages[0].Body)
	fields(t, box.Messages[0].Data, `{"ok":false,"timedOut":true}`)
	s.requireSlots(2)
	acc := s.ledger()
	require.Len(t, acc, 1)
	fields(t, acc[0], `{"tokensGranted":100000,"tokensSpent":1000}`)

	// The runtime never settles: the engine clock times the delegation out at admission + timeoutSec + grace
	// (0 s here). The orchestrator waits for the shadow's status instead of sleeping.
	s = newScenario(t, pool.get(t, "no-grace"), "gs13-expiry", map[string]any{"budgetTotal": 100000})
	w = s.worker(P)
	adm = s.delegate(w, map[string]any{"prompt": "slow", "timeoutSec": 1, "budgetTokens": 1000})
	S = adm.GrandchildTaskRef
	s.must(s.orch, "delegate.spawned", map[string]any{"subId": S, "pid": 102}, nil)
	var waited struct {
		TaskID string `json:"taskId"`
		Status string `json:"status"`
	}
	s.must(s.orch, "task.waitStatus", map[string]any{"taskId": S, "until": "failed", "timeoutMs": 20000}, &waited)
	require.Equal(t, "failed", waited.Status)
	fields(t, s.delegation(S), `{"status":"timed_out","expired":true,"reservedTokens":1000}`)
	var timedOut []teamEvent
	for _, ev := range s.since(s.orch, 0) {
		if ev.Type == "delegate.timed_out" && ev.Data["subId"] == S {
			timedOut = append(timedOut, ev)
		}
	}
	require.Len(t, timedOut, 1)
	fields(t, timedOut[0].Data, `{"ok":false,"expired":true}`)
	box = s.inbox(w)
	require.Len(t, box.Messages, 1)
	require.Equal(t, fence(S, "timed out", "[delegate timed out]"), box.Messages[0].Body)
	fields(t, box.Messages[0].Data, `{"ok":false,"timedOut":true}`)
	s.requireSlots(2)
	acc = s.ledger()
	require.Len(t, acc, 1)
	fields(t, acc[0], `{"tokensGranted":100000,"tokensSpent":1000}`)

	// A late settle is refused and changes nothing; a late spawn report is a no-op.
	seq = s.head()
	s.refused(s.orch, "delegate.settle", map[string]any{"subId": S, "outcome": "ok", "text": "finally"}, wire.CodeBadParams,
		fmt.Sprintf("delegate.settle: delegation %s is already settled (timed_out)", S))
	fields(t, s.obj(s.orch, "delegate.spawned", map[string]any{"subId": S, "pid": 102}),
		fmt.Sprintf(`{"ok":true,"status":"timed_out","subId":%q}`, S))
	s.nothingAppended(seq)
}

// GS-14: cancelling the run records a cancel intent for every delegation in flight; the runtime settles them
// cancelled.
func gs14(t *testing.T, pool *daemonPool) {
	s := newScenario(t, pool.get(t, "fixture"), "gs14", nil)
	w := s.worker(P)
	S := s.delegate(w, map[string]any{"prompt": "x"}).GrandchildTaskRef
	s.must(s.orch, "delegate.spawned", map[string]any{"subId": S, "pid": 101}, nil)

	// The runtime watches for cancel intents.
	sub, err := s.orch.Subscribe(s.ctx, s.head(), []string{"delegate.cancel_requested"})
	require.NoError(t, err)
	t.Cleanup(func() { sub.Close() })

	seq := s.head()
	fields(t, s.obj(s.orch, "run.transition", map[string]any{"to": "cancelled", "reason": "user"}),
		`{"ok":true,"runId":"gs14","status":"cancelled"}`)
	evs := s.appended(seq, "run.cancelled", "delegate.cancel_requested")
	fields(t, evs[0].Data, `{"reason":"user"}`)
	fields(t, evs[1].Data, fmt.Sprintf(`{"taskId":%q,"subId":%q,"reason":"run cancelled"}`, P, S))
	ev, err := sub.Next(s.ctx)
	require.NoError(t, err)
	require.Equal(t, evs[1].Metadata.Seq, ev.Seq, "the intent is pushed to the subscribed runtime")
	fields(t, s.delegation(S), `{"status":"running","cancelRequested":true}`)

	s.must(s.orch, "task.transition", map[string]any{"taskId": P, "to": "cancelled", "reason": "run cancelled"}, nil)
	res := s.settle(S, "cancelled", "killed", nil)
	fields(t, res, fmt.Sprintf(`{"ok":true,"subId":%q,"status":"cancelled","to":"","rerouted":true,"chargedTokens":0}`, S))
	fields(t, s.task(S), `{"status":"cancelled"}`)
	s.requireSlots(2)
	box := s.inbox(s.orch) // the run inbox: P is terminal, so the result is rerouted there
	require.Len(t, box.Messages, 1)
	require.Equal(t, fence(S, "cancelled", "killed"), box.Messages[0].Body)
	require.True(t, box.Messages[0].Rerouted)
	require.Equal(t, "delegate:"+S, box.Messages[0].From)
	fields(t, box.Messages[0].Data, `{"ok":false,"timedOut":false,"cancelled":true}`)

	// A later request from a task of the cancelled run: the broker refuses the worker's credential itself (a
	// worker of a terminal run is stale-token, GS-20(b)) before the engine could answer parent-not-running.
	s.refused(w, "delegate.request", map[string]any{"prompt": "again"}, wire.CodeStaleToken, wire.MsgRunTerminal)
	s.closedBy(w)

	// An explicit cancel records the intent once; a repeat is a no-op.
	s = newScenario(t, pool.get(t, "fixture"), "gs14b", nil)
	w = s.worker(P)
	S = s.delegate(w, map[string]any{"prompt": "x"}).GrandchildTaskRef
	seq = s.head()
	want := fmt.Sprintf(`{"ok":true,"cancelRequested":true,"subId":%q}`, S)
	fields(t, s.obj(s.orch, "delegate.cancel", map[string]any{"subId": S, "reason": "not needed"}), want)
	evs = s.appended(seq, "delegate.cancel_requested")
	fields(t, evs[0].Data, `{"reason":"not needed"}`)
	fields(t, s.obj(s.orch, "delegate.cancel", map[string]any{"subId": S}), want)
	s.appended(seq, "delegate.cancel_requested")
	res = s.settle(S, "cancelled", "", nil)
	fields(t, res, fmt.Sprintf(`{"status":"cancelled","to":%q,"rerouted":false}`, P))
	box = s.inbox(w)
	require.Len(t, box.Messages, 1)
	require.Equal(t, fence(S, "cancelled", ""), box.Messages[0].Body)
	s.requireSlots(2)
}

// GS-15: there is no run lock, so no busy: concurrent requests are decided one after the other, each seeing the
// slots and budget the ones before it took.
func gs15(t *testing.T, pool *daemonPool) {
	s := newScenario(t, pool.get(t, "fixture"), "gs15", nil)
	s.addTask("03_exec", "executor", "/w/wt3", nil)
	conns := []*client.Client{s.worker(P), s.worker(P), s.worker("03_exec")}
	seq := s.head()
	admittedRefs, errs := concurrentRequests(s, conns, map[string]any{"prompt": "together"})
	require.Len(t, admittedRefs, 2, "two slots, two admissions: %v", errs)
	require.Len(t, errs, 1)
	require.Equal(t, wire.CodePolicyDenied, wire.CodeOf(errs[0]), "%v", errs[0])
	require.ErrorContains(t, errs[0], "delegate rejected: nested spawn budget exhausted; 2/2 in flight")
	for _, c := range conns {
		var pong map[string]any
		s.must(c, "ping", nil, &pong)
		fields(t, pong, `{"pong":true,"protocol":1}`)
	}
	s.requireSlots(2, admittedRefs...)
	requireBatches(t, s.since(s.orch, seq), 3)
	s.drain()

	// The same for the budget: two requests for 60000 against 100000 cannot both reserve.
	s = newScenario(t, pool.get(t, "fixture"), "gs15b", map[string]any{"budgetTotal": 100000})
	conns = []*client.Client{s.worker(P), s.worker(P)}
	seq = s.head()
	admittedRefs, errs = concurrentRequests(s, conns, map[string]any{"prompt": "together", "budgetTokens": 60000})
	require.Len(t, admittedRefs, 1, "%v", errs)
	require.Len(t, errs, 1)
	require.Equal(t, wire.CodePolicyDenied, wire.CodeOf(errs[0]), "%v", errs[0])
	require.ErrorContains(t, errs[0], "delegate rejected: requested budget 60000 tokens exceeds parent task '02_exec' remaining allocation 40000 (100000 granted - 60000 spent)")
	acc := s.ledger()
	require.Len(t, acc, 1)
	fields(t, acc[0], `{"tokensGranted":100000,"tokensSpent":60000}`)
	requireBatches(t, s.since(s.orch, seq), 2)
}

// concurrentRequests sends one delegate.request on each connection at once and returns the admitted subIds and
// the refusals; no answer may be busy or lost.
func concurrentRequests(s *scenario, conns []*client.Client, params map[string]any) ([]string, []error) {
	s.t.Helper()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		refs  []string
		errs  []error
		start = make(chan struct{})
	)
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			var adm admitted
			err := c.Call(s.ctx, "delegate.request", params, &adm)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			refs = append(refs, adm.GrandchildTaskRef)
		}()
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		var we *wire.Error
		require.True(s.t, errors.As(err, &we), "every request is answered by the broker: %v", err)
		require.NotEqual(s.t, wire.CodeBusy, we.Code, "there is no lock to be busy")
	}
	return refs, errs
}

// requireBatches checks that evs are n delegate.request decisions, each delegate.requested immediately followed
// by its own delegate.admitted (+ budget.reserved) or delegate.rejected: one atomic batch per request.
func requireBatches(t *testing.T, evs []teamEvent, n int) {
	t.Helper()
	batches := 0
	for i := 0; i < len(evs); {
		require.Equal(t, "delegate.requested", evs[i].Type, "event %d", i)
		sub := evs[i].Data["subId"]
		i++
		require.Less(t, i, len(evs))
		require.Contains(t, []string{"delegate.admitted", "delegate.rejected"}, evs[i].Type)
		require.Equal(t, sub, evs[i].Data["subId"])
		i++
		if i < len(evs) && evs[i].Type == "budget.reserved" {
			require.Equal(t, sub, evs[i].Data["subId"])
			i++
		}
		batches++
	}
	require.Equal(t, n, batches)
}

// GS-16: the grandchild never starts: settled failed from queued, the slot freed, a late spawn report a no-op.
func gs16(t *testing.T, pool *daemonPool) {
	s := newScenario(t, pool.get(t, "fixture"), "gs16", nil)
	w := s.worker(P)
	S := s.delegate(w, map[string]any{"prompt": "x"}).GrandchildTaskRef
	fields(t, s.task(S), `{"status":"queued"}`)
	seq := s.head()
	res := s.settle(S, "failed", "delegate spawn failed: ENOENT", nil)
	fields(t, res, fmt.Sprintf(`{"ok":true,"subId":%q,"status":"failed","to":%q,"rerouted":false,"chargedTokens":0}`, S, P))
	evs := s.appended(seq, "mailbox.appended", "delegate.failed")
	fields(t, evs[1].Data, fmt.Sprintf(`{"subId":%q,"ok":false}`, S))
	fields(t, s.task(S), `{"status":"failed"}`)
	s.requireSlots(2)
	box := s.inbox(w)
	require.Len(t, box.Messages, 1)
	require.Equal(t, fence(S, "failed", "delegate spawn failed: ENOENT"), box.Messages[0].Body)

	seq = s.head()
	fields(t, s.obj(s.orch, "delegate.spawned", map[string]any{"subId": S, "pid": 4242}),
		fmt.Sprintf(`{"ok":true,"status":"failed","subId":%q}`, S))
	s.nothingAppended(seq)
	del := s.delegation(S)
	fields(t, del, `{"status":"failed"}`)
	lacks(t, del, "pid")
	// The scheduler cannot move the shadow: it is not a workflow task.
	s.refused(s.orch, "task.transition", map[string]any{"taskId": S, "to": "running"}, wire.CodeBadParams,
		fmt.Sprintf("task.transition: %s is a delegation's shadow task; settle or cancel the delegation", S))

	// A spawn report without a real pid is not a spawn.
	S2 := s.delegate(w, map[string]any{"prompt": "x"}).GrandchildTaskRef
	s.refused(s.orch, "delegate.spawned", map[string]any{"subId": S2, "pid": 0}, wire.CodeBadParams,
		"delegate.spawned: pid must be an integer in 1..2147483647")
	fields(t, s.delegation(S2), `{"status":"queued"}`)
}

// GS-17: a worker parks its own task on a question and resumes it.
func gs17(t *testing.T, pool *daemonPool) {
	s := newScenario(t, pool.get(t, "fixture"), "gs17", nil)
	s.addTask("03_test", "test-engineer", "/w", map[string]any{"stepId": "test"})
	w := s.worker(P)

	seq := s.head()
	ask := s.obj(w, "wait.request", map[string]any{"to": P, "question": "Which API?", "options": []string{"a", "b"}, "timeoutSec": 7200})
	fields(t, ask, `{"ok":true,"timeoutSec":3600,"clamped":true}`)
	Q := ask["questionId"].(string)
	require.NotEmpty(t, Q)
	askedAt, deadline := ask["askedAt"], ask["deadline"]
	requireAfter(t, askedAt, deadline, 3600*time.Second)
	evs := s.appended(seq, "task.waiting", "ask.requested")
	fields(t, evs[0].Data, fmt.Sprintf(`{"taskId":%q,"questionId":%q,"options":["a","b"]}`, P, Q))
	fields(t, evs[1].Data, fmt.Sprintf(`{"taskId":%q,"questionId":%q,"question":"Which API?","timeoutSec":3600,"clamped":true,"options":["a","b"]}`, P, Q))

	task := s.task(P)
	fields(t, task, `{"status":"waiting"}`)
	fields(t, task["waiting"].(map[string]any), fmt.Sprintf(`{"questionId":%q,"options":["a","b"]}`, Q))
	run := s.obj(s.orch, "query.run", map[string]any{})
	fields(t, run, `{"status":"running"}`)
	fields(t, run["waitState"].(map[string]any), fmt.Sprintf(`{"taskId":%q,"questionId":%q}`, P, Q))

	// The wrong question: bad-params, nothing changes.
	seq = s.head()
	s.refused(w, "wait.resolve", map[string]any{"to": P, "questionId": "other"}, wire.CodeBadParams,
		`wait.resolve: task 02_exec is not waiting on question "other"`)
	s.nothingAppended(seq)
	fields(t, s.task(P), `{"status":"waiting"}`)

	fields(t, s.obj(w, "wait.resolve", map[string]any{"to": P, "questionId": Q}),
		fmt.Sprintf(`{"ok":true,"taskId":%q,"questionId":%q}`, P, Q))
	s.appended(seq, "ask.answered", "task.resumed")
	task = s.task(P)
	fields(t, task, `{"status":"running"}`)
	lacks(t, task, "waiting")
	run = s.obj(s.orch, "query.run", map[string]any{})
	fields(t, run, `{"status":"running"}`)
	lacks(t, run, "waitState")

	// Only the caller's own task, and only a worker.
	seq = s.head()
	s.refused(w, "wait.request", map[string]any{"to": "03_test", "question": "Which API?"}, wire.CodeForbidden,
		"wait.request: 'to' must match the authenticated task")
	s.refused(w, "wait.resolve", map[string]any{"to": "03_test", "questionId": Q}, wire.CodeForbidden,
		"wait.resolve: 'to' must match the authenticated task")
	s.refused(s.orch, "wait.request", map[string]any{"question": "Which API?"}, wire.CodeForbidden,
		"wait.request requires a task-scoped token; re-dispatch with PI_CREW_BROKER_TASK_ID")
	s.nothingAppended(seq)
}

// requireAfter checks deadline = askedAt + d, whether the broker sends unix ms or ISO times.
func requireAfter(t *testing.T, askedAt, deadline any, d time.Duration) {
	t.Helper()
	parse := func(v any) time.Time {
		switch v := v.(type) {
		case float64:
			return time.UnixMilli(int64(v))
		case string:
			tm, err := time.Parse(time.RFC3339Nano, v)
			require.NoError(t, err)
			return tm
		}
		t.Fatalf("time %v (%T)", v, v)
		return time.Time{}
	}
	require.Equal(t, d, parse(deadline).Sub(parse(askedAt)), "askedAt %v deadline %v", askedAt, deadline)
}

// GS-18: events.since paging, a subscription that never repeats a seq across replay and live, and the resync
// frame of a subscriber that stopped reading.
func gs18(t *testing.T, pool *daemonPool) {
	d := pool.get(t, "small-queue")
	s := newScenario(t, d, "gs18", nil)
	w := s.worker(P)
	S1 := s.delegate(w, map[string]any{"prompt": "one"}).GrandchildTaskRef
	S2 := s.delegate(w, map[string]any{"prompt": "two"}).GrandchildTaskRef
	s.must(s.orch, "delegate.spawned", map[string]any{"subId": S1, "pid": 101}, nil)
	s.settle(S1, "ok", "one done", nil)
	s.settle(S2, "failed", "two failed", nil)
	for s.head() < 30 {
		s.must(s.orch, "msg.send", map[string]any{"to": P, "body": "note"}, nil)
	}
	require.Equal(t, uint64(30), s.head(), "the log holds seq 1..30")

	var page sincePage
	s.must(w, "events.since", map[string]any{"sinceSeq": 10, "limit": 5}, &page)
	require.Len(t, page.Events, 5)
	for i, ev := range page.Events {
		require.Equal(t, uint64(11+i), ev.Metadata.Seq)
		require.Equal(t, "gs18", ev.RunID)
	}
	require.Equal(t, uint64(15), page.NextSeq)
	require.True(t, page.HasMore)
	page = sincePage{}
	s.must(w, "events.since", map[string]any{"sinceSeq": 25, "limit": 5}, &page)
	require.Len(t, page.Events, 5)
	require.Equal(t, uint64(30), page.Events[4].Metadata.Seq)
	require.Equal(t, uint64(30), page.NextSeq)
	require.False(t, page.HasMore, "the page ends at the head")
	// A limit out of range is clamped, as pi-crew clamps it, never refused.
	for limit, want := range map[int]int{0: 1, 1001: 20} {
		page = sincePage{}
		s.must(w, "events.since", map[string]any{"sinceSeq": 10, "limit": limit}, &page)
		require.Len(t, page.Events, want, "limit %d", limit)
		require.Equal(t, uint64(10+want), page.NextSeq, "limit %d", limit)
	}
	var raw map[string]any
	s.must(w, "events.since", map[string]any{"sinceSeq": 30}, &raw)
	require.Equal(t, map[string]any{"events": []any{}, "nextSeq": float64(30), "hasMore": false}, raw)

	// events.subscribe from seq 10 while events keep coming: replay then live, each seq once, none skipped. A raw
	// connection, because the client removes repeats by itself.
	live := dialRaw(t, d)
	live.hello(s.orchH)
	produced := make(chan error, 1)
	go func() {
		for i := 0; i < 10; i++ {
			if err := s.orch.Call(s.ctx, "msg.send", map[string]any{"to": P, "body": fmt.Sprintf("live %d", i)}, nil); err != nil {
				produced <- err
				return
			}
		}
		produced <- nil
	}()
	ack, pushes := live.answer(live.send("events.subscribe", map[string]any{"sinceSeq": 10}))
	require.Nil(t, ack.Error, "%s", ack.raw)
	require.JSONEq(t, `{"subscribed":true,"sinceSeq":10}`, string(ack.Result))
	for want := uint64(11); want <= 40; want++ {
		var f rawFrame
		if len(pushes) > 0 {
			f, pushes = pushes[0], pushes[1:]
		} else {
			var err error
			f, err = live.read()
			require.NoError(t, err)
		}
		require.Equal(t, wire.EventTeamEvent, f.Event, "%s", f.raw)
		require.Equal(t, want, *f.Seq, "replay and live in seq order, no repeat, no gap")
		var ev teamEvent
		require.NoError(t, json.Unmarshal(f.Data, &ev))
		require.Equal(t, want, ev.Metadata.Seq, "the frame's seq is the event's")
	}
	require.NoError(t, <-produced)
	require.Equal(t, uint64(40), s.head())
	// Nothing more: the next frame answers a ping.
	pong, pushes := live.answer(live.send("ping", nil))
	require.Empty(t, pushes)
	require.JSONEq(t, `{"pong":true,"protocol":1}`, string(pong.Result))

	// A subscriber that stops reading while ≥ 40 events are produced: the broker (outbound queue 32) sends one
	// resync frame instead of dropping silently, and the connection stays authenticated.
	rc := dialRaw(t, d)
	rc.hello(s.orchH)
	id := rc.send("events.subscribe", map[string]any{"sinceSeq": 40})
	ack, _ = rc.answer(id)
	require.Nil(t, ack.Error, "%s", ack.raw)
	require.JSONEq(t, `{"subscribed":true,"sinceSeq":40}`, string(ack.Result))
	// Large events fill the socket buffer; the small ones after them overflow the queue.
	big := strings.Repeat("x", 200_000)
	for i := 0; i < 10; i++ {
		s.must(s.orch, "msg.send", map[string]any{"to": P, "body": big}, nil)
	}
	for i := 0; i < 40; i++ {
		s.must(s.orch, "msg.send", map[string]any{"to": P, "body": fmt.Sprintf("small %d", i)}, nil)
	}
	head := s.head()
	require.Equal(t, uint64(90), head)

	next := uint64(41)
	var fromSeq uint64
	for fromSeq == 0 {
		f, err := rc.read()
		require.NoError(t, err, "the subscriber must get a resync before anything else ends")
		switch f.Event {
		case wire.EventTeamEvent:
			require.NotNil(t, f.Seq)
			require.Equal(t, next, *f.Seq, "frames before the resync are every seq up to fromSeq-1")
			next++
		case wire.EventResync:
			require.Nil(t, f.Seq, "a resync frame has no seq key: %s", f.raw)
			var data struct {
				FromSeq uint64 `json:"fromSeq"`
			}
			require.NoError(t, json.Unmarshal(f.Data, &data))
			fromSeq = data.FromSeq
		default:
			t.Fatalf("unexpected frame %s", f.raw)
		}
	}
	require.Equal(t, next, fromSeq, "fromSeq is the first seq not delivered")
	t.Logf("resync after %d of the %d events produced while the subscriber did not read", fromSeq-41, head-40)
	require.LessOrEqual(t, fromSeq, head, "some events were not delivered")
	// The subscription stopped: the next frame is the answer to a ping, and the connection is still authenticated.
	id = rc.send("ping", nil)
	pong, pushes = rc.answer(id)
	require.Empty(t, pushes, "nothing after the resync")
	require.JSONEq(t, `{"pong":true,"protocol":1}`, string(pong.Result))
	// Resubscribe from fromSeq-1: the rest, from fromSeq, once each.
	id = rc.send("events.subscribe", map[string]any{"sinceSeq": fromSeq - 1})
	ack, pushes = rc.answer(id)
	require.Nil(t, ack.Error, "%s", ack.raw)
	for next <= head {
		var f rawFrame
		if len(pushes) > 0 {
			f, pushes = pushes[0], pushes[1:]
		} else {
			var err error
			f, err = rc.read()
			require.NoError(t, err)
		}
		require.Equal(t, wire.EventTeamEvent, f.Event, "%s", f.raw)
		require.Equal(t, next, *f.Seq)
		next++
	}
}

// GS-19: handshake and framing, on raw connections.
func gs19(t *testing.T, pool *daemonPool) {
	d := pool.get(t, "fixture")
	s := newScenario(t, d, "gs19", nil)

	// No hello within 1 s: closed without a frame.
	dialRaw(t, d).closedWithout()

	// First request not hello: protocol "hello required", then closed.
	rc := dialRaw(t, d)
	rc.closedWith(rc.send("ping", nil), wire.CodeProtocol, wire.MsgHelloRequired)

	// protocol "1" (a string) is not protocol 1: auth "hello rejected", then closed.
	rc = dialRaw(t, d)
	id := rc.send("hello", map[string]any{"protocol": "1", "runId": s.runID, "taskId": P, "token": s.workers[P].Token})
	rc.closedWith(id, wire.CodeAuth, wire.MsgHelloRejected)

	// A wrong token for a run and task that exist: stale-token, then closed.
	rc = dialRaw(t, d)
	id = rc.send("hello", client.Hello{RunID: s.runID, TaskID: P, Token: "not-the-token"})
	rc.closedWith(id, wire.CodeStaleToken, wire.MsgStaleToken)

	// A 300 KiB line: closed without a frame.
	rc = dialRaw(t, d)
	rc.hello(s.workers[P])
	line := append([]byte(`{"id":"big","method":"ping","params":"`), []byte(strings.Repeat("y", 300<<10))...)
	line = append(line, []byte("\"}\n")...)
	_ = rc.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, _ = rc.conn.Write(line) // the broker may close before it has read the whole line
	rc.closedWithout()

	// A second hello: protocol "hello already completed", then closed.
	rc = dialRaw(t, d)
	rc.hello(s.workers[P])
	rc.closedWith(rc.send("hello", s.workers[P]), wire.CodeProtocol, wire.MsgHelloCompleted)

	// An unknown method: not-implemented, and the connection stays.
	rc = dialRaw(t, d)
	rc.hello(s.workers[P])
	f, _ := rc.answer(rc.send("delegate.teleport", map[string]any{"prompt": "x"}))
	require.NotNil(t, f.Error, "%s", f.raw)
	require.Equal(t, wire.CodeNotImplemented, f.Error.Code)
	require.Equal(t, "method 'delegate.teleport' is not implemented", f.Error.Message)
	f, _ = rc.answer(rc.send("ping", nil))
	require.JSONEq(t, `{"pong":true,"protocol":1}`, string(f.Result))
}

// GS-20: tokens survive a restart; terminal runs refuse their workers, blocked ones do not; revocation takes
// effect at the next frame; after kill -9 the slots are the delegations in flight.
func gs20(t *testing.T, pool *daemonPool) {
	d := pool.get(t, "restartable")
	s := newScenario(t, d, "gs20", nil)
	reconnect := func() {
		s.admin = d.mustDial(s.ctx, adminHello(d))
		s.orch = d.mustDial(s.ctx, s.orchH)
	}

	// (a) SIGTERM and start again: the worker's token is accepted (ok, not stale-token) and a retried request
	// gets its recorded answer.
	w := s.worker(P)
	S1 := s.delegate(w, map[string]any{"prompt": "one", "commandId": "gs20-one"})
	w.Close()
	d.stop()
	d.start()
	reconnect()
	w = s.worker(P)
	require.True(t, w.Ack().OK)
	require.Equal(t, s.runID, w.Ack().Run)
	var again admitted
	s.must(w, "delegate.request", map[string]any{"prompt": "one", "commandId": "gs20-one"}, &again)
	require.Equal(t, S1, again)
	s.requireSlots(2, S1.GrandchildTaskRef)

	// (d) kill -9 with two in flight (one spawned, one queued) and one settled: after the restart the pool
	// holds exactly the in-flight delegations of the log, and admission sees them.
	s.must(s.orch, "delegate.spawned", map[string]any{"subId": S1.GrandchildTaskRef, "pid": 101}, nil)
	S2 := s.delegate(w, map[string]any{"prompt": "two"}).GrandchildTaskRef
	s.settle(S2, "ok", "two done", nil)
	S3 := s.delegate(w, map[string]any{"prompt": "three"}).GrandchildTaskRef
	d.kill()
	d.start()
	reconnect()
	w = s.worker(P)
	var inFlight []string
	for sub, del := range s.delegations() {
		if del["status"] == "queued" || del["status"] == "running" {
			inFlight = append(inFlight, sub)
		}
	}
	require.ElementsMatch(t, []string{S1.GrandchildTaskRef, S3}, inFlight)
	s.requireSlots(2, inFlight...)
	s.refused(w, "delegate.request", map[string]any{"prompt": "four"}, wire.CodePolicyDenied,
		"delegate rejected: nested spawn budget exhausted; 2/2 in flight")
	s.drain()
	s.requireSlots(2)

	// (b) A blocked run is recoverable: its worker is accepted. A completed one refuses it: stale-token, at the
	// hello, and an open connection is ended at once with that frame.
	s = newScenario(t, d, "gs20b", nil)
	w = s.worker(P)
	s.must(s.orch, "task.create", map[string]any{"taskId": "03_test", "role": "test-engineer", "agent": "tester",
		"title": "test", "cwd": "/w", "stepId": "test"}, nil)
	fields(t, s.obj(s.orch, "run.transition", map[string]any{"to": "blocked"}), `{"ok":true,"runId":"gs20b","status":"blocked"}`)
	s.must(w, "ping", nil, nil)
	s.worker(P)
	s.issue("03_test") // a blocked run still gets credentials
	s.must(s.worker("03_test"), "ping", nil, nil)
	s.must(s.orch, "run.transition", map[string]any{"to": "running"}, nil)
	s.must(s.orch, "run.transition", map[string]any{"to": "completed"}, nil)
	s.ended(w, wire.CodeStaleToken, wire.MsgRunTerminal)
	s.dialRefused(s.workers[P], wire.CodeStaleToken, wire.MsgRunTerminal)
	s.refused(s.orch, "credential.issue", map[string]any{"taskId": P}, wire.CodeForbidden, "credential.issue: run gs20b is completed")

	// (c) Revocation while P's connection is open: the connection is ended at once with a revoked frame; a new
	// hello with the same secret is revoked; the orchestrator naming P still gets in; a new
	// credential works.
	s = newScenario(t, d, "gs20c", nil)
	w = s.worker(P)
	s.must(w, "ping", nil, nil)
	old := s.workers[P]
	fields(t, s.obj(s.orch, "credential.revoke", map[string]any{"taskId": P, "reason": "rotated"}),
		fmt.Sprintf(`{"ok":true,"taskId":%q,"role":"worker","revoked":true}`, P))
	s.ended(w, wire.CodeRevoked, wire.MsgTokenRevoked)
	s.dialRefused(old, wire.CodeRevoked, wire.MsgTokenRevoked)
	asP := d.mustDial(s.ctx, client.Hello{RunID: s.runID, TaskID: P, Token: s.orchH.Token})
	s.must(asP, "query.slots", nil, nil)
	s.refused(s.orch, "credential.revoke", map[string]any{"taskId": P}, wire.CodeBadParams, "")
	fresh := s.issue(P)
	require.NotEqual(t, old.Token, fresh.Token)
	s.must(s.worker(P), "ping", nil, nil)
	// Once re-issued, the revoked secret is a superseded one: stale-token, which looks like any wrong token.
	s.dialRefused(old, wire.CodeStaleToken, wire.MsgStaleToken)
}
