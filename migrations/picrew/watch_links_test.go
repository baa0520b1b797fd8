package picrew

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/migrations/picrew/picrewtest"
)

// TestFollowerWatchesOnlyARunsOwnDirectories: the follower watched every entry of a run's mailbox/tasks (a glob): a
// symbolic link there (to another run's directory, or to one outside the crew root) put a watch on what it names, a
// file got a watch of its own, and a run's workers could make as many entries as they liked, each holding one of the
// user's inotify watches, a limit every run shares with every other program of the user (past it, runs are polled
// only). A task's mailbox is watched only when it is a directory named as pi-crew names a task, at most
// maxTaskWatches of them a run: the others are read at every poll, as without notifications.
func TestFollowerWatchesOnlyARunsOwnDirectories(t *testing.T) {
	root := newRoot(t)
	a, b := newRun(t, root, runA), newRun(t, root, runB)
	for _, r := range []*picrewtest.Run{a, b} {
		require.NoError(t, r.AddTask("01_plan", "planner"))
		_, err := r.Message("01_plan", "hello")
		require.NoError(t, err)
	}
	tasks := filepath.Join(a.Dir, "mailbox", "tasks")
	links := map[string]string{
		"linked_out":   t.TempDir(),
		"linked_run_b": filepath.Join(b.Dir, "mailbox", "tasks", "01_plan"),
	}
	for name, target := range links {
		require.NoError(t, os.Symlink(target, filepath.Join(tasks, name)))
	}
	require.NoError(t, os.WriteFile(filepath.Join(tasks, "a_file"), nil, 0o644))
	for i := range maxTaskWatches + 8 {
		require.NoError(t, os.Mkdir(filepath.Join(tasks, fmt.Sprintf("task_%04d", i)), 0o755))
	}

	var watched []string
	for _, d := range watchedDirs(t, root.Dir, runA) {
		if filepath.Dir(d) == tasks {
			watched = append(watched, filepath.Base(d))
		}
	}
	require.LessOrEqual(t, len(watched), maxTaskWatches, "task mailboxes of run A watched")
	require.Contains(t, watched, "01_plan", "the mailbox of a task with a file is watched")
	for name := range links {
		require.NotContains(t, watched, name, "a link is not watched")
	}
	require.NotContains(t, watched, "a_file", "a file is not a task's mailbox")
}

// TestFollowerWatchesNoLinkInPlaceOfARunsDirectory: the run's directory, its mailbox, mailbox/tasks and its steering
// directory were watched by their paths, which a watch follows: a run's worker that put a symbolic link in place of
// its mailbox (to another run's) or of its steering directory (to one outside the crew root) had the follower watch
// what it names, each of its changes waking the run, and another run's watch taken over by the link's path. A
// directory is watched only when it is one, reached without following a link (crewRoot), as it is read.
func TestFollowerWatchesNoLinkInPlaceOfARunsDirectory(t *testing.T) {
	root := newRoot(t)
	a, b := newRun(t, root, runA), newRun(t, root, runB)
	require.NoError(t, b.AddTask("01_plan", "planner"))
	_, err := b.Message("01_plan", "hello")
	require.NoError(t, err)
	require.NoError(t, os.RemoveAll(filepath.Join(a.Dir, "mailbox")))
	require.NoError(t, os.Symlink(filepath.Join(b.Dir, "mailbox"), filepath.Join(a.Dir, "mailbox")))
	require.NoError(t, os.MkdirAll(filepath.Join(root.Dir, "artifacts", runA), 0o755))
	require.NoError(t, os.Symlink(t.TempDir(), filepath.Join(root.Dir, "artifacts", runA, "steering")))

	require.Equal(t, []string{a.Dir}, watchedDirs(t, root.Dir, runA), "run A's directories watched")
}

// watchedDirs follows the crew root at root until it settles, and returns the directories watched for run id.
func watchedDirs(t *testing.T, root, id string) []string {
	t.Helper()
	fl := startFollow(t, root, newMemSink(), nil)
	fl.settle(t)
	fl.stop(t)
	require.True(t, fl.f.watcher.active(), "the test follows with notifications")
	var watched []string
	for d, run := range fl.f.watcher.dirs {
		if run == id {
			watched = append(watched, d)
		}
	}
	return watched
}
