package picrew

import (
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// TestFollowPassMemoryFollowsWhatIsRead: a pass that reads one short line
// appended to each of many files allocates about what it reads, not a read
// buffer of maxTailRead per file: a crew root with many live runs would
// otherwise cost the follower megabytes of garbage per file at every pass.
// The pass runs in the test's goroutine, so the bytes counted are its own.
func TestFollowPassMemoryFollowsWhatIsRead(t *testing.T) {
	const runs = 16
	root := newRoot(t)
	var live []func() error
	for i := range runs {
		r := newRun(t, root, fmt.Sprintf("team_20261201120000_%016x", i))
		require.NoError(t, r.AddTask("01_plan", "planner"))
		_, err := r.Event("run.running", "", nil)
		require.NoError(t, err)
		live = append(live, func() error {
			_, err := r.Event("task.progress", "01_plan", map[string]any{"note": "a short line"})
			return err
		})
	}
	sink := newMemSink()
	fl := NewFollower(root.Dir, sink, &FollowOptions{SettleAfter: time.Hour, CheckpointEvery: time.Nanosecond})
	fl.cks = map[string]events.ImportCheckpoint{} // what Run loads first: no checkpoint yet
	runsDir := filepath.Join(root.Dir, "state", "runs")
	fl.pass(t.Context(), runsDir, true, nil)
	fl.pass(t.Context(), runsDir, true, nil)
	runSteps(t, live)

	before := fl.Stats().Lines
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	fl.pass(t.Context(), runsDir, true, nil)
	runtime.ReadMemStats(&m1)
	require.Equal(t, before+runs, fl.Stats().Lines, "the pass read the line appended to each run")
	allocated := m1.TotalAlloc - m0.TotalAlloc
	require.Less(t, allocated, uint64(maxTailRead),
		"a pass reading %d short lines allocated %d bytes: more than one maxTailRead buffer", runs, allocated)
}
