package broker

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// TestProtocolReadErrorsMatchServer is TestProtocolErrorsMatchServer for the methods the broker serves itself (hello,
// ping, the queries, events.*, task.waitStatus, msg.inbox, the job reads, admin.checkpoint, import.*): every method
// of the description that is no command, found there, so a new one is driven as soon as it is described (and fails
// here until readsBase gives it params it would accept).
//
// Each is called by each role with its accepted params, then, by each role it admits, with each params key left out
// or set to each value of errorCorpus; and with its accepted params in the states of errorStates and in those that
// refuse reads: the run ended and gone cold, records larger than a (small) frame, the smallest frame a daemon allows,
// the worker's and the orchestrator's credentials revoked, and every credential at its connection, wait and
// subscription limits. A hello is sent on a connection of its own.
func TestProtocolReadErrorsMatchServer(t *testing.T) {
	methods := describedMethods(t, false)
	seen := codesSeen{}
	send := func(e *errorsCrew, role, method string, params any) *wire.Error {
		if method == wire.MethodHello {
			return e.hello(params)
		}
		return e.send(role, method, params)
	}

	for _, m := range methods {
		e := newErrorsCrew(t, fixtureOpts{})
		for _, role := range errorRoles {
			base, ok := readsBase(e, m.Name, role)
			require.True(t, ok, "%s is described but readsBase gives no params it would accept", m.Name)
			answer := seen.drive(e, m, role, base, func(params any) *wire.Error { return send(e, role, m.Name, params) })
			if slices.Contains(m.Roles, role) {
				require.Nil(t, answer, "%s refused its accepted params as %s", m.Name, role)
			}
			if m.Name == wire.MethodHello {
				seen.observe(m.Name, base, e.send(role, m.Name, base), "a second hello")
			}
		}
	}

	// The states, each on a crew of its own: no read spoils it for the next one, and a state may have spoiled it on
	// purpose (the run ended, credentials revoked), so the requests are sent as they are.
	for _, st := range append(errorStates(t), readStates...) {
		e := newErrorsCrew(t, st.opts)
		st.apply(e)
		for _, m := range methods {
			for _, role := range errorRoles {
				base, _ := readsBase(e, m.Name, role)
				if st.params != nil {
					st.params(e, m.Name, base)
				}
				seen.observe(m.Name, base, send(e, role, m.Name, base), st.name)
			}
		}
	}

	seen.requireListedAnswered(t, methods)
	seen.requireDescribed(t, methods)
	seen.requireReached(t, map[string][]wire.Code{
		"hello":           {wire.CodeProtocol, wire.CodeRevoked, wire.CodeTooManyConnections},
		"task.waitStatus": {wire.CodeWaitTimeout, wire.CodeTooManyWaits}, "events.subscribe": {wire.CodeTooManySubscriptions},
		"import.append": {wire.CodeDiskFull}, "query.tasks": {wire.CodeOversizeFrame}, "query.job": {wire.CodeOversizeFrame},
		"query.jobs": {wire.CodeOversizeFrame},
		"query.run":  {wire.CodeOversizeFrame}, "query.runs": {wire.CodeOversizeFrame}, "query.ledger": {wire.CodeNoTask},
		"import.checkpoints": {wire.CodeOversizeFrame}, "events.since": {wire.CodeOversizeFrame},
		"query.delegations": {wire.CodeOversizeFrame}, "proxy.result": {wire.CodeForbidden},
		"msg.inbox": {wire.CodeNoManifest, wire.CodeOversizeFrame}, "dashboard.login": {wire.CodeNotImplemented}})
}

// readStates are the states that refuse reads, besides errorStates.
var readStates = []errorState{
	{name: "no dashboard served", opts: fixtureOpts{opts: Options{DashboardLogin: func() (string, time.Time, bool) {
		return "", time.Time{}, false
	}}}, apply: func(*errorsCrew) {}},
	{name: "run ended, gone cold", opts: fixtureOpts{cold: true}, apply: func(e *errorsCrew) {
		// A run holding a slot or a pending ask stays hot: the delegation is settled and Q's question answered first.
		o, q := e.conn(events.RoleOrchestrator), e.f.dial()
		o.ok("delegate.settle", map[string]any{"subId": e.ids["sub"], "outcome": "cancelled", "text": "", "usageTokens": 0})
		o.ok("msg.send", map[string]any{"to": taskQ, "kind": "response", "questionId": e.ids["question"], "body": "a"})
		q.hello(runR, taskQ, e.s.q)
		q.ok("wait.resolve", map[string]any{"questionId": e.ids["question"]})
		q.nc.Close()
		o.ok("run.transition", map[string]any{"to": "completed"})
		e.drop(events.RoleWorker) // ended with the run
		e.f.eng.Read(func(st *projections.State) { require.True(e.t, st.IsCold(runR)) })
	}},
	{name: "records larger than a frame", opts: fixtureOpts{opts: Options{MaxFrame: 4096}}, apply: func(e *errorsCrew) {
		// A page of a 4 KiB frame holds 3.9 KiB: the import's first checkpoint, its path of six-byte chars taking
		// 18 KiB, does not fit in one (P's first pending message and the run inbox's first, the run and its
		// first task, whose texts take more, are sent without them). J's calls do fit, on pages cut to the frame,
		// and so does r1's result, which proxy.result sends as a string of JSON: proxy.complete refuses one it could
		// not answer.
		big := strings.Repeat("x", 3900)
		o, p, a := e.conn(events.RoleOrchestrator), e.conn(events.RoleWorker), e.conn(events.RoleAdmin)
		p.ok("mailbox.ack", map[string]any{"taskId": taskP, "messageIds": []any{e.ids["message"]}})
		o.ok("msg.send", map[string]any{"to": []any{taskP, "parent"}, "body": big})
		o.ok("manifest.revalidate", map[string]any{"jobId": "J", "requestId": "r1", "tools": testGrant})
		text := map[string]any{"type": "text", "text": strings.Repeat("<", 500)}
		o.ok("proxy.complete", map[string]any{"jobId": "J", "requestId": "r1", "nonce": e.ids["nonce"],
			"result": map[string]any{"content": []any{text}}})
		o.ok("task.transition", map[string]any{"taskId": taskP, "to": "queued", "reason": big})
		e.drop(events.RoleWorker) // ended by the retry: P's new attempt says hello again
		p = e.conn(events.RoleWorker)
		// The retry cleared the lease of P's attempt before it: J goes on with the new attempt under a new one.
		o.ok("job.transition", map[string]any{"jobId": "J", "to": "paused"})
		o.ok("lease.open", map[string]any{"jobId": "J", "mode": "continue", "tools": testGrant, "rootToolCallId": "root-2"})
		o.ok("run.transition", map[string]any{"to": "blocked", "reason": strings.Repeat("<", 640)})
		for i := range 24 {
			p.ok("proxy.request", map[string]any{"jobId": "J", "requestId": fmt.Sprintf("%0120d", i),
				"nonce": e.ids["nonce"], "tool": "read"})
		}
		for _, path := range []string{"/a", "/b"} {
			a.okUnescaped(methodImportAppend, importCheckpoint("i"+path, path+strings.Repeat("<", 3000)))
		}
	}},
	{name: "the smallest frame", opts: fixtureOpts{opts: Options{MaxFrame: wire.MaxFrameFloor}},
		apply: func(e *errorsCrew) {
			// A page holds what fits in 0.9 KiB: J does not, nor J's summary, its lease's root of six-byte chars
			// taking 3 KiB (a call whose id took as much is refused: its proxy.requested could not be read whole), but
			// both are sent without the root, and J without its grant if need be.
			// Every event fits, bare if need be, and every run, task, delegation (P's, its description of six-byte
			// chars) and message without its long texts, but not in the answer to a request whose id leaves a result
			// no more than an error answering it would take; nor does r1's state as proxy.result answers it.
			o := e.conn(events.RoleOrchestrator)
			o.ok("job.transition", map[string]any{"jobId": "J", "to": "paused"})
			o.okUnescaped("lease.open", map[string]any{"jobId": "J", "mode": "continue", "tools": testGrant,
				"rootToolCallId": strings.Repeat("<", commands.MaxRootChars)})
		},
		params: func(e *errorsCrew, method string, params map[string]any) {
			switch method {
			case "query.mailbox":
				params["taskId"] = taskP // the run inbox is empty here
				e.idWidth = widestAnswerableID
			case wire.MethodEventsSince, methodProxyResult, "query.run", "query.runs", "query.tasks", wire.MethodMsgInbox,
				"query.delegations", "query.jobs", "query.job":
				e.idWidth = widestAnswerableID
			}
		}},
	{name: "credentials revoked", apply: func(e *errorsCrew) {
		for _, role := range []string{events.RoleWorker, events.RoleOrchestrator} {
			e.revoke(role)
			e.drop(role)
		}
	}},
	{name: "at the connection, wait and subscription limits",
		opts: fixtureOpts{opts: Options{MaxConnsPerCredential: 2, MaxWaitsPerConn: 1, MaxSubscriptionsPerCredential: 1}},
		apply: func(e *errorsCrew) {
			for _, role := range errorRoles {
				// A wait that lasts holds the connection's one.
				e.conn(role).sendLine(fmt.Sprintf(`{"id":"held","method":"task.waitStatus","params":{"runId":%q,`+
					`"taskId":%q,"until":"completed","timeoutMs":60000}}`, runR, taskP))
				if role == events.RoleAdmin {
					continue // the admin's connections and subscriptions are bounded by the daemon's alone
				}
				// A second connection of the credential holds its one subscription.
				c := e.f.dial()
				c.ok(wire.MethodHello, e.helloParams(role))
				c.ok(wire.MethodEventsSubscribe, map[string]any{"sinceSeq": 1 << 53})
			}
		}},
}

// hello sends params as the hello of a new connection, which it then closes, and returns its error.
func (e *errorsCrew) hello(params any) *wire.Error {
	c := e.f.dial()
	defer c.nc.Close()
	return c.call(wire.MethodHello, params).Error
}

// readsBase is params of the non-command method that role's connection would have accepted (the orchestrator's or
// P's, for a method the role may not call), and false for a method it does not know.
func readsBase(e *errorsCrew, method, role string) (map[string]any, bool) {
	switch method {
	case wire.MethodHello:
		return e.helloParams(role), true
	case wire.MethodPing, "query.runs":
		return map[string]any{}, true
	case wire.MethodMsgInbox, wire.MethodEventsSince, wire.MethodEventsSubscribe, "query.run", "query.tasks",
		"query.delegations", "query.ledger", "query.slots", "query.mailbox", "query.jobs":
		return map[string]any{"runId": runR}, true
	case wire.MethodTaskWaitStatus:
		return map[string]any{"runId": runR, "taskId": taskP, "until": "running", "timeoutMs": 0}, true
	case "query.job":
		return map[string]any{"runId": runR, "jobId": "J"}, true
	case "job.authorize":
		return map[string]any{"runId": runR, "tool": "read"}, true
	case "proxy.result":
		return map[string]any{"jobId": "J", "requestId": "r1"}, true
	case methodAdminCheckpoint:
		return map[string]any{"dir": filepath.Join(e.t.TempDir(), "copy")}, true
	case methodImportAppend:
		return importCheckpoint("w1", "/f"), true
	case methodImportCheckpoints:
		return map[string]any{"source": "test"}, true
	case methodDashboardLogin:
		return map[string]any{}, true
	}
	return nil, false
}

// importCheckpoint is import.append's params for one write, commandId import:commandID, of source test's checkpoint
// of path.
func importCheckpoint(commandID, path string) map[string]any {
	checkpoint := map[string]any{"source": "test", "path": path, "inode": 1, "size": 1, "offset": 1}
	return map[string]any{"source": "test", "writes": []any{map[string]any{"commandId": commands.ImportIDPrefix + commandID,
		"runId": events.ImportStream, "events": []any{map[string]any{"type": events.TypeImportCheckpoint, "payload": checkpoint}}}}}
}
