package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/client"
	"github.com/crewlog/crewlog/broker/wire"
)

// TestJobsViews: crewctl jobs and show job against the real broker, after a
// job met an admitted call and a refused one.
func TestJobsViews(t *testing.T) {
	data, socket := liveDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := createRun(t, ctx, socket)
	a, err := client.Dial(ctx, socket, client.Hello{Role: "admin", Token: liveToken}, nil)
	require.NoError(t, err)
	defer a.Close()
	do := func(c *client.Client, method string, p map[string]any) map[string]any {
		t.Helper()
		var out map[string]any
		require.NoError(t, c.Call(ctx, method, p, &out), method)
		return out
	}
	do(a, "run.transition", map[string]any{"runId": run, "to": "running"})
	do(a, "task.create", map[string]any{"runId": run, "taskId": "W", "role": "engineer", "agent": "e", "title": "w", "cwd": "/w"})
	do(a, "task.transition", map[string]any{"runId": run, "taskId": "W", "to": "running"})
	tok := do(a, "credential.issue", map[string]any{"runId": run, "taskId": "W"})["token"].(string)
	grant := []any{map[string]any{"name": "read", "label": "Read", "description": "read", "parameters": map[string]any{},
		"annotations": map[string]any{"readOnlyHint": true}, "callable": "mgr:read",
		"sourceInfo": map[string]any{"path": "/t", "source": "pi", "scope": "user", "origin": "package"}}}
	nonce := do(a, "job.create", map[string]any{"runId": run, "jobId": "J", "taskId": "W", "tools": grant})["nonce"].(string)
	do(a, "lease.open", map[string]any{"runId": run, "jobId": "J", "mode": "start", "rootToolCallId": "call-1"})
	w, err := client.Dial(ctx, socket, client.Hello{RunID: run, TaskID: "W", Token: tok}, nil)
	require.NoError(t, err)
	defer w.Close()
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
