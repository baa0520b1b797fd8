package broker

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/events"
)

// TestAWorkerTokenReachesNoOtherRun: a worker's credential is scoped to its run (docs/protocol.md, Common rules).
// Run R2 has a task of the same id as the worker's, P, with its own credential, a question P parked, a message to
// P and a job of P with a lease and a call; R1's worker P names R2 in every method a worker may call that takes a runId, with params
// that are R2's objects, and is refused forbidden each time while its connection goes on: nothing is recorded in
// either run and no page of R2 is read. Its token does not open R2 either: a hello naming R2 and P with it is
// refused as any wrong token of an existing task is (stale-token), one naming R2's orchestrator as for an unknown
// run (auth).
func TestAWorkerTokenReachesNoOtherRun(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	s := f.seed()
	o2 := f.dial()
	o2.hello("R2", events.OrchestratorKey, f.seedRun("R2", taskP))
	p2 := f.dial()
	p2.hello("R2", taskP, o2.ok("credential.issue", map[string]any{"taskId": taskP})["token"].(string))
	messageID := o2.ok("msg.send", map[string]any{"to": taskP, "body": "for R2's P"})["messageId"].(string) + "_" + taskP
	nonce := o2.ok("job.create", map[string]any{"jobId": "J", "taskId": taskP, "tools": testGrant})["nonce"].(string)
	o2.ok("lease.open", map[string]any{"jobId": "J", "mode": "start", "rootToolCallId": "root-1"})
	p2.ok("proxy.request", map[string]any{"jobId": "J", "requestId": "r1", "nonce": nonce, "tool": "read"})
	questionID := p2.ok("wait.request", map[string]any{"question": "?"})["questionId"].(string)

	w := f.dial()
	w.hello(runR, taskP, s.p)
	r1, r2 := f.lastVersion(runR), f.lastVersion("R2")
	for method, params := range map[string]map[string]any{
		"msg.inbox":        {},
		"events.since":     {"sinceSeq": 0},
		"events.subscribe": {"sinceSeq": 0},
		"task.waitStatus":  {"taskId": taskP, "until": "completed", "timeoutMs": 0},
		"escalate":         {"body": "into R2"},
		"wait.request":     {"question": "into R2?"},
		"wait.resolve":     {"questionId": questionID},
		"delegate.request": {"prompt": "on R2's account"},
		"mailbox.deliver":  {"messageIds": []any{messageID}},
		"mailbox.ack":      {"messageIds": []any{messageID}},
		"query.slots":      {},
		"proxy.request":    {"jobId": "J", "requestId": "r2", "nonce": nonce, "tool": "read"},
		"proxy.cancel":     {"jobId": "J", "requestId": "r1", "nonce": nonce},
		"msg.send":         {"to": taskP, "body": "into R2"},
	} {
		params["runId"] = "R2"
		e := w.fails(method, params, wire.CodeForbidden)
		require.Contains(t, e.Message, "scoped to another run", "%s: %s", method, e.Message)
	}
	// NB: proxy.result takes no runId at all (protocol.json: strict params): it reads the credential's run alone.
	e := w.fails("proxy.result", map[string]any{"runId": "R2", "jobId": "J", "requestId": "r1"}, wire.CodeBadParams)
	require.Contains(t, e.Message, `unknown field "runId"`)
	require.Equal(t, true, w.ok("ping", nil)["pong"], "a refusal leaves the connection open")
	require.Equal(t, r1, f.lastVersion(runR), "a refusal of R1's worker was recorded")
	require.Equal(t, r2, f.lastVersion("R2"), "R1's worker changed R2")

	f.dial().refusedHello("R2", taskP, s.p, wire.CodeStaleToken)
	f.dial().refusedHello("R2", events.OrchestratorKey, s.p, wire.CodeAuth)
	require.Equal(t, true, p2.ok("ping", nil)["pong"], "R2's own worker goes on")
}
