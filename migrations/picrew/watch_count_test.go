package picrew

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// A run's count of task mailboxes watched (maxTaskWatches) is kept with the run, where addRun counted it by going
// over every directory watched of every run: every pass watches each run it syncs, so a pass cost the runs times
// their directories. The count must follow the watches: the task mailboxes the run has watched, none once it goes.
func TestAWatchedRunsTaskMailboxesAreCountedWithIt(t *testing.T) {
	root := newRoot(t)
	a := newRun(t, root, runA)
	for _, task := range []string{"01_plan", "02_build"} {
		require.NoError(t, a.AddTask(task, "planner"))
		_, err := a.Message(task, "hello")
		require.NoError(t, err)
	}
	fl := startFollow(t, root.Dir, newMemSink(), nil)
	fl.settle(t)
	fl.stop(t)
	wt := fl.f.watcher
	require.True(t, wt.active(), "the test follows with notifications")
	tasks := filepath.Join(root.Dir, "state", "runs", runA, "mailbox", "tasks")
	watched := 0
	for d, run := range wt.dirs {
		if run == runA && filepath.Dir(d) == tasks {
			watched++
		}
	}
	require.Equal(t, 2, watched, "the run's task mailboxes are watched")
	require.Equal(t, watched, wt.tasks[runA])

	wt.removeRun(runA) // NB: the follower has stopped: nothing else calls it
	require.NotContains(t, wt.tasks, runA)
}

// A task mailbox directory of a reserved name (orchestrator, all, parent, group: taskNamed) is not read, so it is not
// watched either: its notifications would wake passes that read nothing, and it would take one of the run's
// maxTaskWatches from its tasks' own.
func TestAReservedTaskMailboxIsNotWatched(t *testing.T) {
	root := newRoot(t)
	a := newRun(t, root, runA)
	require.NoError(t, a.AddTask("01_plan", "planner"))
	_, err := a.Message("01_plan", "hello")
	require.NoError(t, err)
	tasks := filepath.Join(root.Dir, "state", "runs", runA, "mailbox", "tasks")
	for _, name := range []string{events.OrchestratorKey, events.RecipientAll, events.RecipientParent,
		events.RecipientGroup} {
		require.NoError(t, os.Mkdir(filepath.Join(tasks, name), 0o755))
	}
	fl := startFollow(t, root.Dir, newMemSink(), nil)
	fl.settle(t)
	fl.stop(t)
	wt := fl.f.watcher
	require.True(t, wt.active(), "the test follows with notifications")
	var watched []string
	for d, run := range wt.dirs {
		if run == runA && filepath.Dir(d) == tasks {
			watched = append(watched, filepath.Base(d))
		}
	}
	require.Equal(t, []string{"01_plan"}, watched, "the run's task mailboxes watched")
	require.Equal(t, 1, wt.tasks[runA])
}
