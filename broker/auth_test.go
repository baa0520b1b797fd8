package broker

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
)

// TestHelloClassification is D§7.4's classification, one hello per case on a fresh connection.
func TestHelloClassification(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	s := f.seed()
	type hello map[string]any
	cases := []struct {
		name  string
		hello hello
		code  wire.Code // "" = accepted
		msg   string
	}{
		{"worker", hello{"protocol": 1, "runId": runR, "taskId": taskP, "token": s.p}, "", ""},
		{"worker with pi-crew's ignored role", hello{"protocol": 1, "runId": runR, "taskId": taskP, "token": s.p, "role": "orchestrator"}, "", ""},
		{"orchestrator", hello{"protocol": 1, "runId": runR, "taskId": events.OrchestratorKey, "token": s.orch}, "", ""},
		{"orchestrator naming a task", hello{"protocol": 1, "runId": runR, "taskId": taskQ, "token": s.orch}, "", ""},
		{"protocol 1.0 is 1", hello{"protocol": 1.0, "runId": runR, "taskId": taskP, "token": s.p}, "", ""},
		{"admin", hello{"protocol": 1, "role": "admin", "token": testAdminToken}, "", ""},
		{"wrong token, task exists", hello{"protocol": 1, "runId": runR, "taskId": taskP, "token": "nope"}, wire.CodeStaleToken, wire.MsgStaleToken},
		{"another task's token", hello{"protocol": 1, "runId": runR, "taskId": taskQ, "token": s.p}, wire.CodeStaleToken, wire.MsgStaleToken},
		// The orchestrator key exists in every run: a wrong token for it must not tell that the run exists.
		{"wrong orchestrator token", hello{"protocol": 1, "runId": runR, "taskId": events.OrchestratorKey, "token": "nope"}, wire.CodeAuth, wire.MsgHelloRejected},
		{"wrong orchestrator token, unknown run", hello{"protocol": 1, "runId": "R404", "taskId": events.OrchestratorKey, "token": "nope"}, wire.CodeAuth, wire.MsgHelloRejected},
		{"wrong token, unknown task", hello{"protocol": 1, "runId": runR, "taskId": "ZZ", "token": "nope"}, wire.CodeAuth, wire.MsgHelloRejected},
		{"wrong token, unknown run", hello{"protocol": 1, "runId": "R404", "taskId": "ZZ", "token": "nope"}, wire.CodeAuth, wire.MsgHelloRejected},
		{"unknown task", hello{"protocol": 1, "runId": runR, "taskId": "ZZ", "token": s.p}, wire.CodeAuth, wire.MsgHelloRejected},
		{"unknown run", hello{"protocol": 1, "runId": "R404", "taskId": taskP, "token": s.p}, wire.CodeAuth, wire.MsgHelloRejected},
		{"protocol 2", hello{"protocol": 2, "runId": runR, "taskId": taskP, "token": s.p}, wire.CodeAuth, wire.MsgHelloRejected},
		{"protocol string", hello{"protocol": "1", "runId": runR, "taskId": taskP, "token": s.p}, wire.CodeAuth, wire.MsgHelloRejected},
		{"no token", hello{"protocol": 1, "runId": runR, "taskId": taskP}, wire.CodeAuth, wire.MsgHelloRejected},
		{"token of 257 chars", hello{"protocol": 1, "runId": runR, "taskId": taskP, "token": strings.Repeat("a", 257)}, wire.CodeAuth, wire.MsgHelloRejected},
		{"empty runId", hello{"protocol": 1, "runId": "", "taskId": taskP, "token": s.p}, wire.CodeAuth, wire.MsgHelloRejected},
		{"wrong admin token", hello{"protocol": 1, "role": "admin", "token": "nope"}, wire.CodeAuth, wire.MsgHelloRejected},
		{"admin token as a worker", hello{"protocol": 1, "runId": runR, "taskId": taskP, "token": testAdminToken}, wire.CodeStaleToken, wire.MsgStaleToken},
		{"worker token as admin", hello{"protocol": 1, "role": "admin", "token": s.p}, wire.CodeAuth, wire.MsgHelloRejected},
		{"params null", nil, wire.CodeAuth, wire.MsgHelloRejected},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := f.dialAs(t)
			var params any = tc.hello
			if tc.hello == nil {
				params = nil
			}
			r := c.call("hello", params)
			if tc.code == "" {
				require.Nil(t, r.Error)
				require.Equal(t, true, c.ok("ping", nil)["pong"])
				return
			}
			require.NotNil(t, r.Error)
			require.Equal(t, tc.code, r.Error.Code)
			require.Equal(t, tc.msg, r.Error.Message)
			c.closed()
		})
	}
}

// TestEndedCredentialClosesConnection: a credential revoked (or re-issued), or its worker's run or task ended,
// while a connection is idle and subscribed, ends that connection at once: the subscription pushes nothing the
// change published or later, then ONE error frame that answers no request (id ""), then the close.
func TestEndedCredentialClosesConnection(t *testing.T) {
	worker := func(s seeded) (string, string) { return taskP, s.p }
	cases := []struct {
		name   string
		change commands.Command
		who    func(s seeded) (task, token string)
		code   wire.Code
		msg    string
	}{
		{"worker revoked", &commands.CredentialRevoke{RunID: runR, TaskID: taskP}, worker, wire.CodeRevoked, wire.MsgTokenRevoked},
		{"worker re-issued", &commands.CredentialIssue{RunID: runR, TaskID: taskP, Digest: digestOf("other")}, worker, wire.CodeRevoked, wire.MsgTokenRevoked},
		{"run completed", &commands.RunTransition{RunID: runR, To: "completed"}, worker, wire.CodeStaleToken, wire.MsgRunTerminal},
		{"task completed", &commands.TaskTransition{RunID: runR, TaskID: taskP, To: "completed"}, worker, wire.CodeStaleToken, wire.MsgTaskTerminal},
		{"orchestrator revoked", &commands.CredentialRevoke{RunID: runR, TaskID: events.OrchestratorKey}, func(s seeded) (string, string) { return events.OrchestratorKey, s.orch }, wire.CodeRevoked, wire.MsgTokenRevoked},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{})
			s := f.seed()
			c := f.dial()
			task, token := tc.who(s)
			c.hello(runR, task, token)
			c.ok("events.subscribe", map[string]any{"sinceSeq": 0})
			before := f.eng.Head()
			r, err := f.eng.Submit(context.Background(), commands.Request{Actor: events.Actor{Role: events.RoleAdmin}, Command: tc.change})
			require.NoError(t, err)
			require.Nil(t, r.Rejected)
			end := c.untilError()
			require.Equal(t, "", end.ID, "the final frame answers no request")
			require.Equal(t, tc.code, end.Error.Code)
			require.Equal(t, tc.msg, end.Error.Message)
			for _, fr := range c.pending {
				var ev struct{ Data teamEvent }
				require.NoError(t, json.Unmarshal(fr, &ev))
				require.LessOrEqual(t, ev.Data.Metadata.Position, before, "pushed an event the change published: %s", fr)
			}
			c.closed()
		})
	}
}

// TestSettlementEndsOnlyItsShadowTask: a delegation's settlement ends the connection of its shadow task's worker
// (the grandchild) and re-checks no other: its parent's, another worker's and the orchestrator's keep working.
func TestSettlementEndsOnlyItsShadowTask(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	s := f.seed()
	p, q, o := f.dial(), f.dial(), f.dial()
	p.hello(runR, taskP, s.p)
	q.hello(runR, taskQ, s.q)
	o.hello(runR, events.OrchestratorKey, s.orch)
	sub := p.ok("delegate.request", map[string]any{"prompt": "p", "description": "d"})["grandchildTaskRef"].(string)
	g := f.dial()
	g.hello(runR, sub, o.ok("credential.issue", map[string]any{"taskId": sub})["token"].(string))
	require.Equal(t, true, g.ok("ping", nil)["pong"])
	o.ok("delegate.settle", map[string]any{"subId": sub, "outcome": "ok", "text": "done"})
	end := g.untilError()
	require.Equal(t, wire.CodeStaleToken, end.Error.Code)
	require.Equal(t, wire.MsgTaskTerminal, end.Error.Message)
	g.closed()
	f.srv.mu.Lock()
	_, indexed := f.srv.byBox[mailboxKey{runR, sub}]
	f.srv.mu.Unlock()
	require.False(t, indexed, "a closed connection leaves the index of mailboxes")
	for _, c := range []*client{p, q, o} {
		require.Equal(t, true, c.ok("ping", nil)["pong"])
	}
}

// TestRunEndKeepsOrchestrator: a terminal run ends its workers' connections, not its orchestrator's (pi-crew
// exempts orchestrator connections; the runtime still reads the finished run).
func TestRunEndKeepsOrchestrator(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	s := f.seed()
	w, o := f.dial(), f.dial()
	w.hello(runR, taskP, s.p)
	o.hello(runR, events.OrchestratorKey, s.orch)
	o.ok("run.transition", map[string]any{"to": "completed"})
	require.Equal(t, wire.CodeStaleToken, w.untilError().Error.Code)
	w.closed()
	require.Equal(t, true, o.ok("ping", nil)["pong"])
}

// TestTokenDerivation pins the token formula others rely on (a retry with the same commandId gets the same
// token) and that the log only ever holds the digest.
func TestTokenDerivation(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	a, err := mintToken(key, "R", "P", "cmd-1")
	require.NoError(t, err)
	b, _ := mintToken(key, "R", "P", "cmd-1")
	require.Equal(t, a, b)
	for _, other := range [][3]string{{"R", "Q", "cmd-1"}, {"S", "P", "cmd-1"}, {"R", "P", "cmd-2"}, {"RP", "", "cmd-1"}} {
		o, _ := mintToken(key, other[0], other[1], other[2])
		require.NotEqual(t, a, o, "%v", other)
	}
	r1, _ := mintToken(key, "R", "P", "")
	r2, _ := mintToken(key, "R", "P", "")
	require.NotEqual(t, r1, r2, "without a commandId every token is fresh")
	require.Len(t, a, 43) // base64url of 32 bytes, unpadded

	f := newFixture(t, fixtureOpts{})
	s := f.seed()
	it := f.log.Read(1)
	defer it.Close()
	for it.Next() {
		for _, tok := range []string{s.orch, s.p, s.q} {
			require.NotContains(t, string(it.Event().Payload), tok, "a secret reached the log")
		}
	}
}

// TestAdminHelloTokenBounds: the admin's hello takes a token of 1..256 UTF-16 units, as a run's credentials are
// (wire.DecodeHello): at 256 units the token that matches the daemon's admin digest is the admin's, and one unit more
// is refused as every failed hello is, even when its digest is the admin's; so is an empty or absent token, and a
// protocol other than 1.
func TestAdminHelloTokenBounds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		token any // nil: absent
		hello map[string]any
		admin bool
	}{
		{"256 units of one byte", strings.Repeat("a", 256), nil, true},
		{"257 units of one byte", strings.Repeat("a", 257), nil, false},
		{"256 units of surrogate pairs", strings.Repeat("😀", 128), nil, true},
		{"257 units, a surrogate pair one too many", strings.Repeat("😀", 128) + "a", nil, false},
		{"one unit", "a", nil, true},
		{"empty", "", nil, false},
		{"absent", nil, nil, false},
		{"protocol 2", "a", map[string]any{"protocol": 2}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hello := map[string]any{"protocol": 1, "role": events.RoleAdmin}
			for k, v := range tc.hello {
				hello[k] = v
			}
			digest := digestOf("a")
			if s, ok := tc.token.(string); ok {
				hello["token"] = s
				digest = digestOf(s) // the daemon's admin token is this one: only its bound can refuse it
			}
			params, err := json.Marshal(hello)
			require.NoError(t, err)
			s := &Server{opts: Options{AdminDigest: digest}}
			id, bad := s.authenticate(params)
			if tc.admin {
				require.Nil(t, bad)
				require.Equal(t, events.RoleAdmin, id.role)
				return
			}
			require.Equal(t, wire.NewError(wire.CodeAuth, wire.MsgHelloRejected), bad)
			require.Zero(t, id)
		})
	}
}
