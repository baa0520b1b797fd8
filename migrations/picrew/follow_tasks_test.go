package picrew

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFollowerKeepsTheTasksReadBefore: a tasks.json that no longer decodes (rewritten with a value no JSON holds, by
// a run's worker, or cut) leaves the tasks read before standing, as an undecodable manifest leaves the one read before,
// and is reported. The follower took such a file for a run without tasks: every task line read until tasks.json
// decoded again (a task's start, its end, its question) named no task of it and was skipped for good, its offset
// passed.
func TestFollowerKeepsTheTasksReadBefore(t *testing.T) {
	root := newRoot(t)
	a := newRun(t, root, runA)
	require.NoError(t, a.AddTask("01_plan", "planner"))
	require.NoError(t, a.SetStatus("running"))
	sink := newMemSink()
	_, pass, reported := stepFollower(t, root.Dir, sink)
	pass()
	require.NoError(t, os.WriteFile(filepath.Join(a.Dir, "tasks.json"), []byte(`[{"id":"01_plan",`), 0o644))
	seq, err := a.Event("task.started", "01_plan", nil)
	require.NoError(t, err)
	pass()
	pass()
	ids, _ := sink.imported()
	require.Contains(t, ids, "import:"+runA+":seq:"+itoa(seq), "the task's start is imported")
	require.Contains(t, reasonsFor(*reported, "state/runs/"+runA+"/tasks.json"),
		"tasks.json does not decode, the tasks read before stand: unexpected end of JSON input")
}
