package picrew

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/migrations/picrew/picrewtest"
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

// TestFollowerReadsAWholeFileOncePerChange: a new or rewritten tasks.json
// is read once, and what was read is what is parsed and checkpointed. It
// was read twice (once to see it changed, once to parse it): twice the
// memory, and the second reading could be another rewrite than the one
// hashed. Here the only allocation that grows with the file is its read:
// the padding is blanks, which the decoder skips.
func TestFollowerReadsAWholeFileOncePerChange(t *testing.T) {
	const size = 8 << 20
	root := newRoot(t)
	a := newRun(t, root, runA)
	require.NoError(t, a.AddTask("01_plan", "planner"))
	require.NoError(t, a.SetStatus("running"))
	padTasks(t, a, size)

	var sink *memSink
	var reported []Skipped
	n := allocatedBy(func() { sink, reported = followPasses(t, root.Dir, 1) })
	require.Empty(t, reported)
	require.Contains(t, withPrefix(mustImported(sink), "import:"+runA+":task:"), "import:"+runA+":task:01_plan")
	require.Less(t, n, uint64(size+size/2), "a pass over a tasks.json of %d bytes allocated %d", size, n)
}

// padTasks pads run's tasks.json with blanks to size bytes: a file that large, whose decoding allocates no more than
// the one it pads.
func padTasks(t *testing.T, run *picrewtest.Run, size int) {
	t.Helper()
	p := filepath.Join(run.Dir, "tasks.json")
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p, append(b, bytes.Repeat([]byte(" "), size-len(b))...), 0o644))
}

func mustImported(s *memSink) []string {
	ids, _ := s.imported()
	return ids
}

// TestFollowerReadsAFinishedRunsWholeFileOncePerChange: a finished run is let go once it is reconciled and its
// checkpoints are written, which the follower checks after every pass by comparing the files with their
// checkpoints. A run that cannot be let go (its events.jsonl ends in a partial line, so the file never matches its
// checkpoint) had its whole files read again by that check at every pass: a worker leaving a line unfinished made
// the follower read a 16 MiB tasks.json every second, forever. What the follower read at a stamp it holds.
func TestFollowerReadsAFinishedRunsWholeFileOncePerChange(t *testing.T) {
	const size, passes = 8 << 20, 6
	root := newRoot(t)
	a := newRun(t, root, runA)
	require.NoError(t, a.AddTask("01_plan", "planner"))
	require.NoError(t, a.SetStatus("completed"))
	padTasks(t, a, size)
	_, err := a.Event("task.progress", "01_plan", map[string]any{"note": "a line"})
	require.NoError(t, err)
	require.NoError(t, picrewtest.AppendRaw(a.EventsPath(), []byte(`{"type":"task.progress"`)))

	var sink *memSink
	n := allocatedBy(func() { sink, _ = followPasses(t, root.Dir, passes) })
	require.Contains(t, mustImported(sink), "import:"+runA+":reconcile:run:completed", "the run was reconciled")
	require.Less(t, n, uint64(2*size), "%d passes over a finished run with a tasks.json of %d bytes allocated %d",
		passes, size, n)
}
