package picrew

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/migrations/picrew/picrewtest"
)

// runWithMore writes run id under root as twoRuns does, and with more, one more event, message and steer than
// twoRuns' runs hold: what a reader of its files reads that a reader of twoRuns' run of the same id does not.
func runWithMore(t *testing.T, rootDir, id string, more bool) {
	t.Helper()
	root, err := picrewtest.New(rootDir)
	require.NoError(t, err)
	r := newRun(t, root, id)
	require.NoError(t, r.AddTask("01_plan", "planner"))
	n := 1
	if more {
		n = 2
	}
	for i := range n {
		_, err := r.Event("task.progress", "01_plan", map[string]any{"n": i + 1})
		require.NoError(t, err)
		_, err = r.Message("01_plan", "hello from "+id)
		require.NoError(t, err)
		require.NoError(t, r.Steer("01_plan", "go on, "+id))
	}
	require.NoError(t, r.SetStatus("running"))
}

// swapAfterListing replaces the directory rel of root with a symbolic link to target right after the reader's nth
// listing of the directory listed (relative to root) returns: between the reader's look at what is there and its
// open of what it found, as a run's worker can. swapped tells whether it did.
func swapAfterListing(t *testing.T, root, listed string, nth int, rel, target string) (swapped func() bool) {
	t.Helper()
	list := readDir
	n := 0
	readDir = func(c *crewRoot, p string) ([]os.DirEntry, error) {
		entries, err := list(c, p)
		if p == filepath.Join(root, filepath.FromSlash(listed)) {
			if n++; n == nth {
				dir := filepath.Join(root, filepath.FromSlash(rel))
				require.NoError(t, os.Rename(dir, dir+".away"))
				require.NoError(t, os.Symlink(target, dir))
			}
		}
		return entries, err
	}
	t.Cleanup(func() { readDir = list })
	return func() bool { return n >= nth }
}

// TestReaderStaysInItsRunWhenADirectoryBecomesALink: a run's workers can change its directories, and a reader
// refused a symbolic link only in place of a file (O_NOFOLLOW) and, when it listed them, in place of a directory: a
// directory of run A (the run's own, its mailbox, a task's mailbox, its steering directory) replaced by a link after
// the listing and before the open made the one-shot import and the follower read run B's files, or files outside the
// crew root, as run A's. Each file under such a link is refused as if absent, reported, by both.
func TestReaderStaysInItsRunWhenADirectoryBecomesALink(t *testing.T) {
	runDir := "state/runs/" + runA
	for _, tc := range []struct {
		dir    string // the directory of run A replaced by a link
		listed string // the listing after which it is
	}{
		{runDir, "state/runs"},
		{runDir + "/mailbox", runDir + "/mailbox/tasks/01_plan"},
		{runDir + "/mailbox/tasks/01_plan", runDir + "/mailbox/tasks/01_plan"},
		{"artifacts/" + runA, "artifacts/" + runA + "/steering"},
		{"artifacts/" + runA + "/steering", "artifacts/" + runA + "/steering"},
	} {
		for _, to := range []string{"run B's", "outside the root"} {
			t.Run(strings.ReplaceAll(tc.dir, runA, "A")+" to "+to, func(t *testing.T) {
				for _, way := range []string{"import", "follow"} {
					root := t.TempDir()
					runWithMore(t, root, runA, false)
					runWithMore(t, root, runB, true)
					target := filepath.Join(root, filepath.FromSlash(strings.ReplaceAll(tc.dir, runA, runB)))
					if to == "outside the root" {
						outside := t.TempDir()
						runWithMore(t, outside, runA, true)
						target = filepath.Join(outside, filepath.FromSlash(tc.dir))
					}
					dir := filepath.Join(root, filepath.FromSlash(tc.dir))
					require.NoError(t, os.Rename(dir, dir+".gone"))
					absent, _ := importPlan(t, root)
					require.NoError(t, os.Rename(dir+".gone", dir))

					if way == "import" {
						swapped := swapAfterListing(t, root, tc.listed, 1, tc.dir, target)
						ids, skipped := importPlan(t, root)
						require.True(t, swapped(), "the link was made while the import read")
						require.Equal(t, absent, ids, "the import reads run A as if %s were not there", tc.dir)
						require.True(t, slices.ContainsFunc(skipped, func(s Skipped) bool {
							return strings.Contains(s.Reason, "symbolic link")
						}), "the link is reported: %v", skipped)
						continue
					}
					// NB: the follower lists a run's files twice in its first pass (to prime its planner, then to
					// read them), the run directory once.
					nth := 2
					if tc.listed == "state/runs" {
						nth = 1
					}
					swapped := swapAfterListing(t, root, tc.listed, nth, tc.dir, target)
					sink, reported := followPasses(t, root, 3)
					require.True(t, swapped(), "the link was made while the follower read")
					got, _ := sink.imported()
					sortStrings(got)
					require.Subset(t, absent, got, "the follower reads nothing of what the link names")
					require.True(t, slices.ContainsFunc(reported, func(s Skipped) bool {
						return strings.Contains(s.Reason, "symbolic link")
					}), "the link is reported: %v", reported)
				}
			})
		}
	}
}
