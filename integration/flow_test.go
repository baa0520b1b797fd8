package integration

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/client"
	"github.com/crewlog/crewlog/broker/wire"
)

// Answers of the engine methods, as far as these tests read them.
type (
	runCreated struct {
		RunID             string `json:"runId"`
		OrchestratorToken string `json:"orchestratorToken"`
	}
	credential struct {
		Token string `json:"token"`
	}
	admitted struct {
		OK                bool    `json:"ok"`
		GrandchildTaskRef string  `json:"grandchildTaskRef"`
		ChildDepth        int     `json:"childDepth"`
		TimeoutSec        float64 `json:"timeoutSec"`
	}
	inbox struct {
		Messages []struct {
			ID   string `json:"id"`
			From string `json:"from"`
			Body string `json:"body"`
			Kind string `json:"kind"`
		} `json:"messages"`
		Total int `json:"total"`
	}
	delegation struct {
		SubID        string `json:"subId"`
		ParentTaskID string `json:"parentTaskId"`
		Status       string `json:"status"`
	}
	delegations struct {
		Delegations []delegation `json:"delegations"`
	}
)

// crew is a run set up over the socket: the admin created it, the orchestrator created and started tasks and
// issued their worker credentials.
type crew struct {
	d     *daemon
	runID string
	orch  client.Hello
	// workers by task id.
	workers map[string]client.Hello
}

func adminHello(d *daemon) client.Hello { return client.Hello{Role: "admin", Token: d.adminToken()} }

// newCrew creates a run with tasks, each started and given a worker credential.
func newCrew(ctx context.Context, t *testing.T, d *daemon, tasks ...string) *crew {
	admin := d.mustDial(ctx, adminHello(d))
	var run runCreated
	require.NoError(t, admin.Call(ctx, "run.create", map[string]any{"team": "team", "goal": "integration", "cwd": "/repo"}, &run))
	require.NotEmpty(t, run.RunID)
	require.NotEmpty(t, run.OrchestratorToken)
	c := &crew{d: d, runID: run.RunID, workers: map[string]client.Hello{},
		orch: client.Hello{RunID: run.RunID, TaskID: "orchestrator", Token: run.OrchestratorToken}}
	orch := d.mustDial(ctx, c.orch)
	for _, task := range tasks {
		c.addWorker(ctx, t, orch, task)
	}
	return c
}

func (c *crew) addWorker(ctx context.Context, t *testing.T, orch *client.Client, task string) client.Hello {
	require.NoError(t, orch.Call(ctx, "task.create", map[string]any{
		"taskId": task, "role": "executor", "agent": "agent", "title": "task " + task, "cwd": "/repo/" + task,
	}, nil))
	require.NoError(t, orch.Call(ctx, "task.transition", map[string]any{"taskId": task, "to": "running"}, nil))
	var cred credential
	require.NoError(t, orch.Call(ctx, "credential.issue", map[string]any{"taskId": task}, &cred))
	require.NotEmpty(t, cred.Token)
	h := client.Hello{RunID: c.runID, TaskID: task, Token: cred.Token}
	c.workers[task] = h
	return h
}

func delegateParams(commandID string) map[string]any {
	p := map[string]any{"prompt": "look around", "description": "explore the tree"}
	if commandID != "" {
		p["commandId"] = commandID
	}
	return p
}

// TestDelegateFlow is the happy path over a real socket: admin creates a run, the orchestrator sets up a task
// and issues its credential, the worker's delegation is admitted, the orchestrator settles it, and the worker
// finds the result in its inbox.
func TestDelegateFlow(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	d := newDaemon(t)
	t.Cleanup(d.cleanup)
	d.start()

	require.Len(t, d.printed, 3)
	require.Equal(t, "crewd: admin token file "+filepath.Join(d.data, "admin.token"), d.printed[0])
	require.Regexp(t, `^crewd: dashboard http://127\.0\.0\.1:[0-9]+/login\?code=[A-Za-z0-9_-]{22}$`, d.printed[1])
	require.Equal(t, "crewd: socket "+d.socket, d.printed[2])
	require.NotContains(t, strings.Join(d.printed, "\n"), d.adminToken(), "the token itself is never printed")
	c := newCrew(ctx, t, d, "P")
	worker := d.mustDial(ctx, c.workers["P"])
	require.Equal(t, c.runID, worker.Ack().Run)

	var adm admitted
	require.NoError(t, worker.Call(ctx, "delegate.request", delegateParams(""), &adm))
	require.True(t, adm.OK)
	require.Regexp(t, `^gc-`, adm.GrandchildTaskRef)
	require.Equal(t, 2, adm.ChildDepth)
	require.Equal(t, float64(900), adm.TimeoutSec)

	orch := d.mustDial(ctx, c.orch)
	var dels delegations
	require.NoError(t, orch.Call(ctx, "query.delegations", nil, &dels))
	require.Equal(t, []delegation{{SubID: adm.GrandchildTaskRef, ParentTaskID: "P", Status: "queued"}}, dels.Delegations)

	require.NoError(t, orch.Call(ctx, "delegate.settle", map[string]any{
		"subId": adm.GrandchildTaskRef, "outcome": "ok", "text": "found three packages",
	}, nil))

	var box inbox
	require.NoError(t, worker.Call(ctx, wire.MethodMsgInbox, nil, &box))
	require.Len(t, box.Messages, 1, "the settled result is delivered to the parent's inbox")
	require.Contains(t, box.Messages[0].Body, "found three packages")

	require.NoError(t, orch.Call(ctx, "query.delegations", nil, &dels))
	require.Equal(t, "completed", dels.Delegations[0].Status)

	// A worker may not call the runtime's methods.
	err := worker.Call(ctx, "delegate.settle", map[string]any{"subId": adm.GrandchildTaskRef, "outcome": "ok", "text": "x"}, nil)
	require.Equal(t, wire.CodeForbidden, wire.CodeOf(err), "%v", err)
	d.stop()
}

// TestRestartKeepsTokens: after SIGTERM and a new start on the same data directory, the worker's old token still
// authenticates (SPEC §5, GS-20(a)), the admin token file is reused, and the state is the same.
func TestRestartKeepsTokens(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	d := newDaemon(t)
	t.Cleanup(d.cleanup)
	d.start()
	c := newCrew(ctx, t, d, "P")
	adminToken := d.adminToken()

	worker := d.mustDial(ctx, c.workers["P"])
	var adm admitted
	require.NoError(t, worker.Call(ctx, "delegate.request", delegateParams("req-1"), &adm))
	worker.Close()
	d.stop()

	d.start()
	require.Equal(t, adminToken, d.adminToken(), "the admin token is reused")
	worker = d.mustDial(ctx, c.workers["P"])
	var again admitted
	require.NoError(t, worker.Call(ctx, "delegate.request", delegateParams("req-1"), &again))
	require.Equal(t, adm, again, "the recorded outcome, across a restart")

	orch := d.mustDial(ctx, c.orch)
	var slots struct {
		Held   int      `json:"held"`
		SubIDs []string `json:"subIds"`
	}
	require.NoError(t, orch.Call(ctx, "query.slots", nil, &slots))
	require.Equal(t, []string{adm.GrandchildTaskRef}, slots.SubIDs, "slots after a restart are the delegations in flight (GS-20(d))")
	d.stop()
}

// TestBadFlagsExitTwo: a bad flag is reported with every other problem, and crewd exits 2 without starting.
func TestBadFlagsExitTwo(t *testing.T) {
	d := newDaemon(t)
	cmd := exec.Command(d.bin, "--data", d.data, "--socket", d.socket, "--max-depth", "0", "--log-format", "xml")
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	require.Equal(t, 2, cmd.ProcessState.ExitCode(), "%s", out)
	require.Contains(t, string(out), "--max-depth: 0 is outside 1..10")
	require.Contains(t, string(out), `--log-format: "xml" is not one of text, json`)
	require.NoDirExists(t, d.data, "nothing is created on bad flags")

	help := exec.Command(d.bin, "--help")
	out, err = help.Output()
	require.NoError(t, err)
	require.Contains(t, string(out), "--unmetered-delegates allow|deny")
}
