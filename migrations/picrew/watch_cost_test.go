package picrew

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWatchingARunCostsNothingOfTheOtherRunsWatches: every pass watches each run it syncs (addRun), every run of the
// root at a full pass, dormant ones included every dormantEvery passes. Counting a run's task mailboxes watched by
// going over every directory watched, every run's, made a pass cost the runs times their directories: a root of a
// few thousand finished runs of tens of tasks each kept a core busy. A run's count is kept with it: watching it
// costs the same however many directories the other runs have watched.
func TestWatchingARunCostsNothingOfTheOtherRunsWatches(t *testing.T) {
	root := newRoot(t)
	a := newRun(t, root, runA)
	require.NoError(t, a.AddTask("01_plan", "planner"))
	_, err := a.Message("01_plan", "hello")
	require.NoError(t, err)
	fl := startFollow(t, root.Dir, newMemSink(), nil)
	fl.settle(t)
	fl.stop(t)
	wt := fl.f.watcher
	require.True(t, wt.active(), "the test follows with notifications")
	r := fl.f.runs[runA]
	steering := fl.f.src.steeringDir(runA)
	t.Cleanup(fl.f.src.files().close)

	const calls = 200
	watchRun := func() time.Duration {
		start := time.Now()
		for range calls {
			wt.addRun(r, steering) // NB: the watcher is closed: nothing new is watched, the rest is done as in a pass
		}
		return time.Since(start)
	}
	few := watchRun()
	// Another 300,000 directories watched, as 10,000 runs of 30 task mailboxes leave them.
	for i := range 10_000 {
		run := fmt.Sprintf("team_20261201120000_%014d", i)
		tasks := filepath.Join(root.Dir, "state", "runs", run, "mailbox", "tasks")
		for j := range 30 {
			wt.dirs[filepath.Join(tasks, fmt.Sprintf("%02d_task", j))] = run
		}
	}
	many := watchRun()
	// NB: a ratio with a wide margin, not a timing: on a loaded machine the two may differ several times over, where
	// going over every run's directories at each call made the second hundreds of times the first.
	require.Less(t, many, 20*few+100*time.Millisecond, "%d calls: %v with few directories watched, %v with many",
		calls, few, many)
}
