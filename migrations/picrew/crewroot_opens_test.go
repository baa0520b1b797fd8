package picrew

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/migrations/picrew/picrewtest"
)

// TestFollowPassOpensEachRunsDirectoryOnce: every look at a run's file (a stat, an open) walked the directories from
// the crew root one at a time, state/runs through the root and the run's directory without following a link: a
// pass over a root's runs opened state/runs, and each run's directory, once for every look at every file, several
// for each file. A pass holds state/runs, artifacts and the run it reads open (crewRoot.held) now, so it opens each
// once, and a run's files relative to its directory.
func TestFollowPassOpensEachRunsDirectoryOnce(t *testing.T) {
	root := newRoot(t)
	const runs = 4
	ids := map[string]bool{}
	for i := range runs {
		id := fmt.Sprintf("team_20261201120000_%016x", i)
		ids[id] = true
		r := newRun(t, root, id)
		steps := picrewtest.Lifecycle(r, 12)
		runSteps(t, steps[:len(steps)-3]) // live: every file of it looked at in each pass
	}
	sink := newMemSink()
	_, pass, _ := stepFollower(t, root.Dir, sink)
	for range 3 {
		pass()
	}

	at, inRoot := openAt, openInRoot
	t.Cleanup(func() { openAt, openInRoot = at, inRoot })
	var runsDir unix.Stat_t
	require.NoError(t, unix.Stat(filepath.Join(root.Dir, "state", "runs"), &runsDir))
	layoutOpens, runOpens := map[string]int{}, 0
	openAt = func(dir int, name string, flags int, mode uint32) (int, error) {
		var st unix.Stat_t
		if ids[name] && unix.Fstat(dir, &st) == nil && st.Ino == runsDir.Ino {
			runOpens++
		}
		return at(dir, name, flags, mode)
	}
	openInRoot = func(r *os.Root, name string, flag int, perm fs.FileMode) (*os.File, error) {
		layoutOpens[name]++
		return inRoot(r, name, flag, perm)
	}
	pass()
	// Per pass: state/runs listed, and held; artifacts held.
	require.Equal(t, map[string]int{"state/runs": 2, "artifacts": 1}, layoutOpens)
	// Per run: state/runs/<run> held, and listed.
	require.Equal(t, runs*2, runOpens, "a run's directory opened for each look at each of its files")
}

// TestFollowPassHoldsTheRunsDirectoryItOpened: a run's directory replaced by a link to another run's between the
// pass's listing of it and its reads of its files is not followed: the pass reads on in the directory it opened (the
// run's own files), and the next pass meets the link (not a run directory: the run is no longer followed).
func TestFollowPassHoldsTheRunsDirectoryItOpened(t *testing.T) {
	root := t.TempDir()
	runWithMore(t, root, runA, false)
	runWithMore(t, root, runB, true)
	own, _ := importPlan(t, root)
	runDir := "state/runs/" + runA
	swapped := swapAfterListing(t, root, runDir, 2, runDir, filepath.Join(root, "state", "runs", runB))
	sink, reported := followPasses(t, root, 3)
	require.True(t, swapped(), "the link was made while the follower read")
	got, _ := sink.imported()
	sortStrings(got)
	require.Subset(t, own, got, "nothing of run B read as run A's")
	require.Contains(t, reasonsFor(reported, runDir), "not a run directory", "the next pass meets the link")
}
