package daemon

import (
	"bufio"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/client"
	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/migrations/picrew/picrewtest"
)

// TestRunFollowsPicrew: crewd --follow-picrew imports a crew root through its own socket and keeps importing what
// pi-crew writes next; a directory that is not a crew root stops the start.
func TestRunFollowsPicrew(t *testing.T) {
	c := testConfig(t)
	c.HTTPAddr = ""
	c.FollowPicrew = filepath.Join(t.TempDir(), "nothing")
	require.ErrorContains(t, Run(context.Background(), c, io.Discard, discard()), "is not a pi-crew crew root")

	root, err := picrewtest.New(t.TempDir())
	require.NoError(t, err)
	const runID = "team_20261201120000_00000000000000c3"
	run, err := root.NewRun(runID)
	require.NoError(t, err)
	steps := picrewtest.Lifecycle(run, 2)
	for _, s := range steps[:6] {
		require.NoError(t, s())
	}
	c.FollowPicrew = root.Dir
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, c, pw, discard()); pw.Close() }()
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "crewd: socket ") {
			break
		}
	}
	go io.Copy(io.Discard, pr)
	token, err := AdminToken(c.DataDir)
	require.NoError(t, err)
	cl, err := client.Dial(ctx, c.SocketPath, client.Hello{Role: "admin", Token: token}, nil)
	require.NoError(t, err)
	defer cl.Close()

	// NB: the follower inside crewd has no hook to wait on, so this asks until the import shows (bounded).
	taskStatus := func(task string) string {
		var res struct {
			Tasks []struct {
				ID     string `json:"id"`
				Status string `json:"status"`
			} `json:"tasks"`
		}
		err := cl.Call(ctx, "query.tasks", map[string]any{"runId": runID}, &res)
		if wire.CodeOf(err) == wire.CodeNoManifest {
			return ""
		}
		require.NoError(t, err)
		for _, x := range res.Tasks {
			if x.ID == task {
				return x.Status
			}
		}
		return ""
	}
	waitStatus := func(task, want string) {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		deadline := time.After(time.Minute)
		for taskStatus(task) != want {
			select {
			case <-tick.C:
			case <-deadline:
				require.FailNow(t, "not imported", "task %s never %s", task, want)
			}
		}
	}
	waitStatus("01_plan", "running")
	for _, s := range steps[6:] {
		require.NoError(t, s())
	}
	waitStatus("02_exec", "completed")
	cancel()
	require.NoError(t, <-done)
}
