package integration

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
)

// TestCommandIDsBelongToTheirCaller, over the socket against a real crewd (SPEC §2 "Whose id it is"): two
// orchestrators that name their ids alike each get their own task — also when they retry after a restart — a
// worker that pre-claims its orchestrator's revoke id does not stop the revocation, and the same caller reusing
// an id for another request is refused bad-params.
func TestCommandIDsBelongToTheirCaller(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	d := newDaemon(t)
	t.Cleanup(d.cleanup)
	d.start()

	a, b := newCrew(ctx, t, d, "P"), newCrew(ctx, t, d, "P")
	createTask := map[string]any{"taskId": "T1", "role": "executor", "agent": "agent", "title": "t", "cwd": "/repo/t1",
		"commandId": "create-task-1"}
	type taskAnswer struct {
		OK     bool   `json:"ok"`
		TaskID string `json:"taskId"`
		Status string `json:"status"`
	}
	answers := map[string]taskAnswer{}
	for _, c := range []*crew{a, b} {
		orch := d.mustDial(ctx, c.orch)
		var ans taskAnswer
		require.NoError(t, orch.Call(ctx, "task.create", createTask, &ans))
		answers[c.runID] = ans
		var tasks struct {
			Tasks []struct {
				TaskID string `json:"id"`
			} `json:"tasks"`
		}
		require.NoError(t, orch.Call(ctx, "query.tasks", nil, &tasks))
		var ids []string
		for _, tk := range tasks.Tasks {
			ids = append(ids, tk.TaskID)
		}
		require.Contains(t, ids, "T1", "run %s got its task", c.runID)
		orch.Close()
	}

	// The worker of run B claims the id its orchestrator will revoke it with.
	worker := d.mustDial(ctx, b.workers["P"])
	require.NoError(t, worker.Call(ctx, "msg.send", map[string]any{"to": "parent", "body": "mine",
		"commandId": "revoke-P"}, nil))
	orchB := d.mustDial(ctx, b.orch)
	require.NoError(t, orchB.Call(ctx, "credential.revoke", map[string]any{"taskId": "P", "commandId": "revoke-P"}, nil))
	err := worker.Call(ctx, "ping", nil, nil)
	require.Equal(t, wire.CodeRevoked, wire.CodeOf(err), "the worker's credential is revoked: %v", err)

	// The same caller, the same id, another request.
	other := map[string]any{"taskId": "T2", "role": "executor", "agent": "agent", "title": "t", "cwd": "/repo/t2",
		"commandId": "create-task-1"}
	err = orchB.Call(ctx, "task.create", other, nil)
	require.Equal(t, wire.CodeBadParams, wire.CodeOf(err), "%v", err)
	require.Contains(t, err.Error(), "commandId already used for a different request")
	orchB.Close()
	d.stop()

	// Retries after a restart get each caller's own answer.
	d.start()
	for _, c := range []*crew{a, b} {
		orch := d.mustDial(ctx, c.orch)
		var ans taskAnswer
		require.NoError(t, orch.Call(ctx, "task.create", createTask, &ans))
		require.Equal(t, answers[c.runID], ans)
		orch.Close()
	}
	d.stop()
}
