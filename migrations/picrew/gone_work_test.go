package picrew

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/migrations/picrew/picrewtest"
)

// TestRemovedRunsAreLetGoInLinearWork: a run directory removed (pi-crew's retention, which removes finished runs by
// the hundred) had its checkpoints found by a look at every checkpoint of the follower, and its watches by a look at
// every directory watched, every run's: a retention pass over a root of thousands of finished runs took millions of
// steps for each run it removed. The follower looks at the checkpoints and watches of the run removed alone now
// (goneWork), and each is let go as before: its checkpoints recorded gone, its watches dropped.
func TestRemovedRunsAreLetGoInLinearWork(t *testing.T) {
	const runs = 24
	root := newRoot(t)
	ids := make([]string, runs)
	for i := range ids {
		ids[i] = fmt.Sprintf("team_20261201120000_%016x", i+1)
		runSteps(t, picrewtest.Lifecycle(newRun(t, root, ids[i]), 10))
	}
	sink := newMemSink()
	fl, _, reported := stepFollower(t, root.Dir, sink)
	runsDir := filepath.Join(root.Dir, "state", "runs")
	w := fl.watch(t.Context(), runsDir)
	t.Cleanup(w.close)
	require.True(t, w.active(), "the test follows with notifications")
	fl.watcher = w
	pass := func() { fl.pass(t.Context(), runsDir, true, w) }
	dormant := func() bool {
		for _, id := range ids {
			if r := fl.runs[id]; r == nil || !r.dormant {
				return false
			}
		}
		return true
	}
	for i := 0; i < 20 && !dormant(); i++ {
		pass()
	}
	require.True(t, dormant(), "every finished run is let go")
	checkpoints, watched := len(fl.cks), len(w.dirs)
	require.Greater(t, checkpoints, 5*runs, "the runs' files are checkpointed")
	require.Greater(t, watched, 4*runs, "the runs' directories are watched")

	for _, id := range ids {
		require.NoError(t, os.RemoveAll(filepath.Join(runsDir, id)))
		require.NoError(t, os.RemoveAll(filepath.Join(root.Dir, "artifacts", id)))
	}
	before := fl.goneWork
	pass()
	// NB: a step a checkpoint, a watched directory and one whose watch a notification said is lost, of the runs
	// removed (every run here): a watched directory is lost at most once.
	require.LessOrEqual(t, fl.goneWork-before, uint64(checkpoints+2*watched),
		"steps to let %d runs go, of %d checkpoints and %d watched directories", runs, checkpoints, watched)

	require.Empty(t, fl.runs, "the removed runs are let go")
	require.Empty(t, fl.cks, "their checkpoints are recorded gone, and forgotten")
	require.Equal(t, map[string]string{runsDir: ""}, w.dirs, "their directories are no longer watched")
	for _, id := range ids {
		require.Contains(t, reasonsFor(*reported, "state/runs/"+id),
			"run directory removed (pi-crew's retention?): what was imported stays; no longer followed")
	}
	gone := map[string]bool{}
	for _, wr := range sink.appended {
		if c, ok := wr.Items[0].Payload.(*events.ImportCheckpoint); ok && c.Gone {
			gone[c.Path] = true
		}
	}
	require.Len(t, gone, checkpoints, "every checkpoint of the removed runs is recorded gone")
}

// TestCheckpointRunNamesTheRunOfItsDirectories: a checkpoint is filed under the run whose directory, or steering
// directory, holds its file, the two a run removed has its checkpoints marked gone under, and under none otherwise.
func TestCheckpointRunNamesTheRunOfItsDirectories(t *testing.T) {
	for _, tc := range []struct {
		path, run string
		ok        bool
	}{
		{path: "state/runs/" + runA + "/events.jsonl", run: runA, ok: true},
		{path: "state/runs/" + runA + "/mailbox/tasks/01_plan/inbox.jsonl", run: runA, ok: true},
		{path: "artifacts/" + runA + "/steering/01_plan.jsonl", run: runA, ok: true},
		{path: "artifacts/" + runA + "/other/01_plan.jsonl"},
		{path: "artifacts/" + runA + "/steering"},
		{path: "state/runs/" + runA},
		{path: "state/runs//events.jsonl"},
		{path: "state/other/" + runA + "/events.jsonl"},
		{path: "events.jsonl"},
	} {
		run, ok := checkpointRun(tc.path)
		require.Equal(t, tc.ok, ok, tc.path)
		if ok {
			require.Equal(t, tc.run, run, tc.path)
		}
	}
}
