package daemon

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/client"
	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/migrations/picrew"
	"github.com/crewlog/crewlog/migrations/picrew/picrewtest"
)

// TestRunFollowsPicrew: crewd --follow-picrew imports a crew root through its own socket and keeps importing what
// pi-crew writes next; a directory that is not a crew root stops the start.
func TestRunFollowsPicrew(t *testing.T) {
	c := testConfig(t)
	c.HTTPAddr = ""
	c.FollowPicrew = filepath.Join(t.TempDir(), "nothing")
	require.ErrorContains(t, Run(context.Background(), c, io.Discard, discard()), "is not a pi-crew crew root")

	const runID = "team_20261201120000_00000000000000c3"
	root, _, steps := lifecycle(t, runID)
	runSteps(t, steps[:6])
	waitStatus, stop := following(t, c, root.Dir, runID)
	defer stop()
	waitStatus("01_plan", "running")
	runSteps(t, steps[6:])
	waitStatus("02_exec", "completed")
}

// TestRunFollowsPicrewWithinItsFrameCap: crewd's follower sizes its requests to crewd's own frame cap (--max-frame),
// as crewctl's follower sizes them to the default one: a write larger than a request may carry is reported and left
// out, and the run's later writes are imported. With the default bound, twice a small cap, a request carrying a
// large message was refused whole at every pass, and nothing after it in the run was ever imported.
func TestRunFollowsPicrewWithinItsFrameCap(t *testing.T) {
	c := testConfig(t)
	c.HTTPAddr = ""
	c.MaxFrame = 32 << 10
	const runID = "team_20261201120000_00000000000000c4"
	root, run, steps := lifecycle(t, runID)
	runSteps(t, steps[:11])
	_, err := run.Message("02_exec", strings.Repeat("x", 40<<10))
	require.NoError(t, err)
	runSteps(t, steps[11:])
	waitStatus, stop := following(t, c, root.Dir, runID)
	defer stop()
	waitStatus("02_exec", "completed")
}

// following starts crewd with c following the crew root root, and returns an admin client of it and a wait for a
// task of run runID to reach a status; stop stops crewd.
func following(t *testing.T, c Config, root, runID string) (waitStatus func(task, want string), stop func()) {
	t.Helper()
	c.FollowPicrew = root
	ctx := context.Background()
	d := startRun(t, c)
	cl := dialAdmin(ctx, t, c.DataDir, c.SocketPath, &client.Options{MaxFrame: c.MaxFrame})

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
	waitStatus = func(task, want string) {
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
	return waitStatus, func() {
		cl.Close()
		require.NoError(t, d.stop())
	}
}

// lifecycle makes a crew root with run runID, and returns them and the steps of the run's life
// (picrewtest.Lifecycle).
func lifecycle(t *testing.T, runID string) (*picrewtest.Root, *picrewtest.Run, []func() error) {
	t.Helper()
	root, err := picrewtest.New(t.TempDir())
	require.NoError(t, err)
	run, err := root.NewRun(runID)
	require.NoError(t, err)
	return root, run, picrewtest.Lifecycle(run, 2)
}

func runSteps(t *testing.T, steps []func() error) {
	t.Helper()
	for i, s := range steps {
		require.NoError(t, s(), "step %d", i)
	}
}

// TestRunFollowerCheckpointsAtStop: on a stop, the pi-crew follower records where it got to in each file before the
// broker closes, so the next start reads on from there. The checkpoints of what the follower imported since its last
// periodic one (every picrew.DefaultCheckpointEvery) are sent by the follower as it stops; with the broker closed
// first they were refused, and the next start read those files again from the older checkpoints. NB: it tells the
// two apart only while it runs within one periodic checkpoint (10 s; it takes a tenth of a second): crewd's Config
// does not set the follower's interval.
func TestRunFollowerCheckpointsAtStop(t *testing.T) {
	mainUmask(t)
	c := testConfig(t)
	c.HTTPAddr = ""
	const runID = "team_20261201120000_00000000000000c5"
	root, run, steps := lifecycle(t, runID)
	runSteps(t, steps[:6])
	waitStatus, stop := following(t, c, root.Dir, runID)
	waitStatus("01_plan", "running")
	runSteps(t, steps[6:])
	waitStatus("02_exec", "completed")
	stop()

	c.FollowPicrew = ""
	startRun(t, c)
	token, err := AdminToken(c.DataDir)
	require.NoError(t, err)
	sink := picrew.NewDaemonSink(func(ctx context.Context) (picrew.Caller, error) {
		return client.Dial(ctx, c.SocketPath, client.Hello{Role: "admin", Token: token}, nil)
	})
	defer sink.Close()
	cks, err := sink.Checkpoints(context.Background())
	require.NoError(t, err)
	fi, err := os.Stat(run.EventsPath())
	require.NoError(t, err)
	rel, err := filepath.Rel(root.Dir, run.EventsPath())
	require.NoError(t, err)
	var offset int64 = -1
	for _, ck := range cks {
		if ck.Path == rel {
			offset = ck.Offset
		}
	}
	require.Equal(t, fi.Size(), offset, "the checkpoint of %s, of %d checkpoints", rel, len(cks))
}
