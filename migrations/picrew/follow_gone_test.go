package picrew

import (
	"fmt"
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
	require.Equal(t, shortCks, longCks, "checkpoints kept after 6 runs removed: %d, against %d after one", longCks, shortCks)
	require.Equal(t, shortDirs, longDirs, "directories watched after 6 runs removed: %d, against %d after one", longDirs, shortDirs)
}
