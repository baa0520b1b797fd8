package picrew

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/migrations/picrew/picrewtest"
)

// A run directory pi-crew's retention removed leaves nothing in the follower's memory once its checkpoints are
// recorded gone: a gone checkpoint says what no checkpoint says (the file is read from its start if it comes
// back), and a crewd following a crew root for months sees every run it ever imported removed in turn.
func TestFollowForgetsRemovedRuns(t *testing.T) {
	held := func(runs int) (checkpoints, watched int) {
		root := newRoot(t)
		sink := newMemSink()
		fl := startFollow(t, root.Dir, sink, nil)
		for i := range runs {
			r := newRun(t, root, fmt.Sprintf("team_20261201120000_%016x", i+1))
			runSteps(t, picrewtest.Lifecycle(r, 2))
			fl.settle(t)
			require.NoError(t, r.Delete())
			fl.settle(t)
		}
		fl.stop(t)
		// A follower started again loads the checkpoints recorded, the gone ones among them.
		again := startFollow(t, root.Dir, sink, nil)
		again.settle(t)
		again.stop(t)
		require.Len(t, again.f.cks, len(fl.f.cks))
		require.True(t, fl.f.watcher.active(), "the test follows with notifications")
		return len(fl.f.cks), len(fl.f.watcher.dirs)
	}
	shortCks, shortDirs := held(1)
	longCks, longDirs := held(6)
	require.Equal(t, shortCks, longCks, "checkpoints kept after 6 runs removed: %d, against %d after one",
		longCks, shortCks)
	require.Equal(t, shortDirs, longDirs, "directories watched after 6 runs removed: %d, against %d after one",
		longDirs, shortDirs)
}

// TestFollowTakesBackAFileThatCameBack: a file of a run a pass found removed (renamed away by a worker, say) and
// that came back under its name kept its tail marked gone, though it was read again: each of its checkpoints was
// recorded gone (which the follower reads as none), so the finished run never matched its checkpoints and was never
// let go (read at every pass, held in memory), and a restarted follower read the file again from its start. A file
// listed again is followed again, and checkpointed as such.
func TestFollowTakesBackAFileThatCameBack(t *testing.T) {
	root := newRoot(t)
	a := newRun(t, root, runA)
	steps := picrewtest.Lifecycle(a, 12)
	runSteps(t, steps[:len(steps)-3])
	sink := newMemSink()
	fl, pass, reported := stepFollower(t, root.Dir, sink)
	pass()
	inbox := filepath.Join(a.Dir, "mailbox", "tasks", "02_exec", "inbox.jsonl")
	require.NoError(t, os.Rename(inbox, inbox+".away"))
	pass()
	require.Contains(t, reasonsFor(*reported, fl.src.rel(inbox)), "file removed: what was imported of it stays")
	require.NoError(t, os.Rename(inbox+".away", inbox))
	runSteps(t, steps[len(steps)-3:]) // the run ends
	for range 6 {
		pass()
	}
	require.True(t, fl.runs[runA].dormant, "the finished run is let go")
	c, ok := fl.cks[fl.src.rel(inbox)]
	require.True(t, ok, "the file that came back is checkpointed")
	require.False(t, c.Gone)
	requireCopy(t, root.Dir, sink, copyOf{})
}
