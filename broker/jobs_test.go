package broker

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/events"
)

var testGrant = []any{
	map[string]any{"name": "read", "label": "Read", "description": "read", "parameters": map[string]any{"type": "object"},
		"annotations": map[string]any{"readOnlyHint": true}, "callable": "mgr:read",
		"sourceInfo": map[string]any{"path": "/t/read", "source": "pi", "scope": "user", "origin": "package"}},
}

// A job end to end over the socket: the manager creates it (the nonce is answered once, and again to a retry of
// the same commandId), opens the lease; the worker asks for a call with the nonce; the manager revalidates and
// completes; the worker reads the result. Another task may not touch the job, a wrong nonce is refused and
// recorded, and job.authorize answers from the state.
func TestJobOverTheSocket(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	s := f.seed()
	o := f.dial()
	o.hello(runR, "orchestrator", s.orch)
	created := o.ok("job.create", map[string]any{"jobId": "J", "taskId": taskP, "tools": testGrant, "commandId": "create-J"})
	nonce, _ := created["nonce"].(string)
	require.NotEmpty(t, nonce)
	again := o.ok("job.create", map[string]any{"jobId": "J", "taskId": taskP, "tools": testGrant, "commandId": "create-J"})
	require.Equal(t, nonce, again["nonce"], "a retry of the same commandId gets the same nonce")
	o.ok("lease.open", map[string]any{"jobId": "J", "mode": "start", "rootToolCallId": "call-1"})

	w := f.dial()
	w.hello(runR, taskP, s.p)
	bad := w.fails("proxy.request", map[string]any{"jobId": "J", "requestId": "r0", "nonce": "guess", "tool": "read"}, wire.CodePolicyDenied)
	require.Contains(t, bad.Message, "nonce")
	w.ok("proxy.request", map[string]any{"jobId": "J", "requestId": "r1", "nonce": nonce, "tool": "read", "args": map[string]any{"p": 1}})
	require.Equal(t, "admitted", w.ok("proxy.result", map[string]any{"jobId": "J", "requestId": "r1"})["state"])

	q := f.dial()
	q.hello(runR, taskQ, s.q)
	q.fails("proxy.request", map[string]any{"jobId": "J", "requestId": "r2", "nonce": nonce, "tool": "read"}, wire.CodeForbidden)
	q.fails("proxy.result", map[string]any{"jobId": "J", "requestId": "r1"}, wire.CodeForbidden)
	w.fails("job.authorize", map[string]any{"parentToolCallId": "call-1", "tool": "read"}, wire.CodeForbidden)

	require.Equal(t, true, o.ok("job.authorize", map[string]any{"parentToolCallId": "call-1/x", "tool": "read"})["allowed"])
	require.Equal(t, false, o.ok("job.authorize", map[string]any{"parentToolCallId": "call-1/x", "tool": "bash"})["allowed"])
	o.ok("manifest.revalidate", map[string]any{"jobId": "J", "requestId": "r1", "tools": testGrant})
	o.ok("proxy.complete", map[string]any{"jobId": "J", "requestId": "r1", "nonce": nonce,
		"result": map[string]any{"content": []any{map[string]any{"type": "text", "text": "hi"}}, "usage": 5}})
	res := w.ok("proxy.result", map[string]any{"jobId": "J", "requestId": "r1"})
	require.Equal(t, "completed", res["state"])
	require.JSONEq(t, `{"content":[{"text":"hi","type":"text"}]}`, res["result"].(string), "usage is stripped (T14)")

	jobs := o.ok("query.jobs", map[string]any{})["jobs"].([]any)
	require.Len(t, jobs, 1)
	job := o.ok("query.job", map[string]any{"jobId": "J", "limit": 1})
	require.Len(t, job["requests"], 1)
	require.Equal(t, float64(1), job["seen"])
}

// TestJobsReachableAtTheSmallestFrame: a run's jobs (64 at most, their ids and roots the manager's to choose) do
// not fit in one frame of the smallest size a daemon allows, as the pages of the run's other records do not;
// query.jobs cuts its page to the frame and every job is read once by following its cursor, instead of the whole
// list being oversize-frame.
func TestJobsReachableAtTheSmallestFrame(t *testing.T) {
	frame := wire.MaxFrameFloor
	f := newFixture(t, fixtureOpts{opts: Options{MaxFrame: frame}})
	s := f.seed()
	o := f.dial()
	o.hello(runR, events.OrchestratorKey, s.orch)
	var jobs []string
	for i := range 8 {
		id := fmt.Sprintf("J%d-%s", i, strings.Repeat("j", 60))
		o.ok("job.create", map[string]any{"jobId": id, "taskId": taskP, "tools": testGrant})
		o.ok("job.transition", map[string]any{"jobId": id, "to": "cancelled"}) // one live job per run
		jobs = append(jobs, id)
	}

	r := o.call("query.jobs", map[string]any{})
	require.Nil(t, r.Error, "the first page of the run's jobs")
	pages := pager{t: t, frame: frame}
	require.Equal(t, jobs, pages.all(o, "query.jobs", nil, "jobs", "jobId"))
}

// TestProxyResultTakesAReadTurn: proxy.result reads a call's result from the log and renders it, up to a frame of
// it, as a page read does, so it takes its credential's read turn: a worker's connections together render no more
// of them at once than MaxReadsPerCredential, however many connections its token opens.
func TestProxyResultTakesAReadTurn(t *testing.T) {
	f := newFixture(t, fixtureOpts{opts: Options{MaxReadsPerCredential: 1}})
	_, w, _ := leasedJobCall(f, f.seed())

	release := f.holdReads(workerKey(taskP))
	w.sendLine(`{"id":"result","method":"proxy.result","params":{"jobId":"J","requestId":"r1"}}`)
	awaitReads(t, f.srv, workerKey(taskP), 1, 1) // it waits for the turn the other read holds
	release()
	r := w.answerOf("result")
	require.Nil(t, r.Error)
	require.Contains(t, string(r.Result), `"state":"admitted"`)
}

// leasedJobCall is job J of task P under lease 1 (root root-1) with call r1 of the granted read admitted: the
// orchestrator's connection, P's, and the job's nonce.
func leasedJobCall(f *fixture, s seeded) (o, w *client, nonce string) {
	o, w = f.dialOrchestrator(s), f.dial()
	w.hello(runR, taskP, s.p)
	nonce = o.ok("job.create", map[string]any{"jobId": "J", "taskId": taskP, "tools": testGrant})["nonce"].(string)
	o.ok("lease.open", map[string]any{"jobId": "J", "mode": "start", "rootToolCallId": "root-1"})
	w.ok("proxy.request", map[string]any{"jobId": "J", "requestId": "r1", "nonce": nonce, "tool": "read"})
	return o, w, nonce
}
