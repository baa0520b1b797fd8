package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker"
	"github.com/crewlog/crewlog/broker/client"
	"github.com/crewlog/crewlog/broker/wire"
)

// TestJobsViews: crewctl jobs and show job against the real broker, after a
// job met an admitted call and a refused one.
func TestJobsViews(t *testing.T) {
	data, socket := liveDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, a := taskW(t, ctx, socket)
	do := func(c *client.Client, method string, p map[string]any) map[string]any {
		t.Helper()
		return callOK(t, ctx, c, method, p)
	}
	nonce, w := jobJ(t, ctx, socket, run, a)
	do(w, "proxy.request", map[string]any{"jobId": "J", "requestId": "r1", "nonce": nonce, "tool": "read"})
	var refused *wire.Error
	require.ErrorAs(t, w.Call(ctx, "proxy.request", map[string]any{"jobId": "J", "requestId": "r2", "nonce": nonce, "tool": "bash"}, nil), &refused)
	require.Equal(t, wire.CodePolicyDenied, refused.Code)

	r := crewctl(t, dialBroker, "jobs", run, "--data", data, "--socket", socket)
	require.Equal(t, exitOK, r.code, r.err)
	require.Contains(t, r.out, "JOB")
	require.Regexp(t, `J\s+W\s+running\s+1 active\s+call-1\s+1\s+2\s+1`, r.out)

	r = crewctl(t, dialBroker, "show", "job", run, "J", "--data", data, "--socket", socket, "--json")
	require.Equal(t, exitOK, r.code, r.err)
	var job jobDetail
	require.NoError(t, json.Unmarshal([]byte(r.out), &job))
	require.Equal(t, "running", job.Status)
	require.Len(t, job.Grant, 1)
	require.True(t, job.Grant[0].ReadOnly)
	require.Len(t, job.Requests, 2)
	require.Equal(t, "admitted", job.Requests[0].State)
	require.Equal(t, "not-granted", job.Requests[1].Reason)

	r = crewctl(t, dialBroker, "show", "job", run, "J", "--data", data, "--socket", socket)
	require.Equal(t, exitOK, r.code, r.err)
	require.Contains(t, r.out, "r2")
	require.Contains(t, r.out, "not-granted")
}

// TestJobsFollowsEveryPage: query.jobs cuts its page to the frame, and a run's jobs (their ids the manager's to
// choose) need not fit in one; crewctl jobs lists every job by following the cursor, not the first page alone.
func TestJobsFollowsEveryPage(t *testing.T) {
	data, socket := liveDaemonWith(t, broker.Options{MaxFrame: wire.MaxFrameFloor})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, a := taskW(t, ctx, socket)
	var jobs []string
	for i := range 8 {
		id := fmt.Sprintf("J%d-%s", i, strings.Repeat("j", 60))
		callOK(t, ctx, a, "job.create", map[string]any{"runId": run, "jobId": id, "taskId": "W", "tools": jobGrant})
		// One live job per run: the next is created once this one is cancelled.
		callOK(t, ctx, a, "job.transition", map[string]any{"runId": run, "jobId": id, "to": "cancelled"})
		jobs = append(jobs, id)
	}
	var first struct {
		NextCursor string `json:"nextCursor"`
	}
	require.NoError(t, a.Call(ctx, "query.jobs", map[string]any{"runId": run}, &first))
	require.NotEmpty(t, first.NextCursor, "the run's jobs span pages")

	r := crewctl(t, dialBroker, "jobs", run, "--data", data, "--socket", socket, "--json")
	require.Equal(t, exitOK, r.code, r.err)
	var res struct {
		Jobs []broker.JobSummary `json:"jobs"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.out), &res))
	var got []string
	for _, j := range res.Jobs {
		got = append(got, j.JobID)
	}
	require.Equal(t, jobs, got)

	r = crewctl(t, dialBroker, "jobs", run, "--data", data, "--socket", socket)
	require.Equal(t, exitOK, r.code, r.err)
	for _, id := range jobs {
		require.Contains(t, r.out, id)
	}
}

// TestShowJobFollowsEveryPage: query.job cuts its requests to the frame, and a job's request ids are its worker's to
// choose: show job lists every request by following the cursor, not the first page alone, and a request with no
// result yet says so ("-"), not a position 0 no log has.
func TestShowJobFollowsEveryPage(t *testing.T) {
	data, socket := liveDaemonWith(t, broker.Options{MaxFrame: wire.MaxFrameFloor})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, a := taskW(t, ctx, socket)
	nonce, w := jobJ(t, ctx, socket, run, a)
	var ids []string
	for i := range 12 {
		id := fmt.Sprintf("%02d-%s", i, strings.Repeat("r", 100))
		callOK(t, ctx, w, "proxy.request", map[string]any{"jobId": "J", "requestId": id, "nonce": nonce, "tool": "read"})
		ids = append(ids, id)
	}
	var first struct {
		NextCursor string `json:"nextCursor"`
	}
	require.NoError(t, a.Call(ctx, "query.job", map[string]any{"runId": run, "jobId": "J", "limit": 500}, &first))
	require.NotEmpty(t, first.NextCursor, "the job's requests span pages")

	r := crewctl(t, dialBroker, "show", "job", run, "J", "--data", data, "--socket", socket, "--json")
	require.Equal(t, exitOK, r.code, r.err)
	var job jobDetail
	require.NoError(t, json.Unmarshal([]byte(r.out), &job))
	var got []string
	for _, req := range job.Requests {
		got = append(got, req.RequestID)
	}
	require.Equal(t, ids, got)
	require.Empty(t, job.NextCursor)

	r = crewctl(t, dialBroker, "show", "job", run, "J", "--data", data, "--socket", socket)
	require.Equal(t, exitOK, r.code, r.err)
	for _, id := range ids {
		require.Regexp(t, `(?m)^`+id+`\s+1\s+read\s+admitted\s+-\s+\d+\s+-$`, r.out, "no result yet")
	}
}

// jobJ creates job J of task W (taskW) in run with jobGrant and opens its lease (root call-1), and returns its nonce
// and a client of W's worker, closed when the test ends.
func jobJ(t *testing.T, ctx context.Context, socket, run string, a *client.Client) (nonce string, w *client.Client) {
	t.Helper()
	tok := callOK(t, ctx, a, "credential.issue", map[string]any{"runId": run, "taskId": "W"})["token"].(string)
	create := map[string]any{"runId": run, "jobId": "J", "taskId": "W", "tools": jobGrant}
	nonce = callOK(t, ctx, a, "job.create", create)["nonce"].(string)
	callOK(t, ctx, a, "lease.open", map[string]any{"runId": run, "jobId": "J", "mode": "start", "rootToolCallId": "call-1"})
	w, err := client.Dial(ctx, socket, client.Hello{RunID: run, TaskID: "W", Token: tok}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { w.Close() })
	return nonce, w
}

// jobGrant is the grant of the tests' jobs: one read-only tool.
var jobGrant = []any{map[string]any{
	"name": "read", "label": "Read", "description": "read", "parameters": map[string]any{},
	"annotations": map[string]any{"readOnlyHint": true}, "callable": "mgr:read",
	"sourceInfo": map[string]any{"path": "/t", "source": "pi", "scope": "user", "origin": "package"},
}}

// taskW creates a running run with a running task W on the daemon at socket, and returns the run and an admin's
// client, closed when the test ends.
func taskW(t *testing.T, ctx context.Context, socket string) (run string, a *client.Client) {
	run = createRun(t, ctx, socket)
	a = adminOf(t, ctx, socket)
	callOK(t, ctx, a, "run.transition", map[string]any{"runId": run, "to": "running"})
	callOK(t, ctx, a, "task.create", map[string]any{"runId": run, "taskId": "W", "role": "engineer", "agent": "e",
		"title": "w", "cwd": "/w"})
	callOK(t, ctx, a, "task.transition", map[string]any{"runId": run, "taskId": "W", "to": "running"})
	return run, a
}

// adminOf is a client of the daemon at socket with the admin token, closed when the test ends.
func adminOf(t *testing.T, ctx context.Context, socket string) *client.Client {
	a, err := client.Dial(ctx, socket, client.Hello{Role: "admin", Token: liveToken}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	return a
}

// callOK calls method on c, requires it to succeed and returns its answer.
func callOK(t *testing.T, ctx context.Context, c *client.Client, method string, p map[string]any) map[string]any {
	t.Helper()
	var out map[string]any
	require.NoError(t, c.Call(ctx, method, p, &out), method)
	return out
}
