package picrew

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFollowerKeepsTheTasksReadBefore: a tasks.json that no longer decodes (rewritten with a value no JSON holds, by
// a run's worker, or cut) leaves the tasks read before standing, as an undecodable manifest leaves the one read
// before, and is reported. The follower took such a file for a run without tasks: every task line read until
// tasks.json decoded again (a task's start, its end, its question) named no task of it and was skipped for good, its
// offset passed.
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

// TestFollowerReadsARefusedManifestOncePerChange: a manifest.json the follower refuses (it does not decode, or names
// another run) is read again only when it changes, as every whole file is. It was read at every pass, its stamp never
// noted: a run's worker writing a manifest of 16 MiB that does not decode made the follower read 16 MiB every second,
// forever.
func TestFollowerReadsARefusedManifestOncePerChange(t *testing.T) {
	for name, manifest := range map[string]string{
		"does not decode": `{"runId":` + strings.Repeat(" ", 1<<20),
		"another run":     `{"runId":"team_20261201120000_00000000000000ff"}` + strings.Repeat(" ", 1<<20),
	} {
		t.Run(name, func(t *testing.T) {
			root := newRoot(t)
			a := newRun(t, root, runA)
			require.NoError(t, a.SetStatus("running"))
			sink := newMemSink()
			_, pass, _ := stepFollower(t, root.Dir, sink)
			pass()
			p := filepath.Join(a.Dir, "manifest.json")
			good, err := os.ReadFile(p)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(p, []byte(manifest), 0o644))
			reads := countOpens(t, p)
			for range 5 {
				pass()
			}
			require.Equal(t, int64(1), reads.Load(), "reads of a manifest that did not change")

			require.NoError(t, os.WriteFile(p, append(good, ' '), 0o644))
			seq, err := a.Event("task.progress", "", nil)
			require.NoError(t, err)
			pass()
			require.Equal(t, int64(2), reads.Load(), "the manifest changed")
			require.Contains(t, mustImported(sink), "import:"+runA+":seq:"+itoa(seq), "the run is followed again")
		})
	}
}

// TestFollowerReadsANewRunsRefusedManifestOncePerChange: a run whose manifest the follower refuses from the first
// reading is not followed, and its manifest read again only once it changes.
func TestFollowerReadsANewRunsRefusedManifestOncePerChange(t *testing.T) {
	root := newRoot(t)
	a := newRun(t, root, runA)
	p := filepath.Join(a.Dir, "manifest.json")
	require.NoError(t, os.WriteFile(p, []byte(`{"runId":`), 0o644))
	reads := countOpens(t, p)
	sink := newMemSink()
	_, pass, reported := stepFollower(t, root.Dir, sink)
	for range 5 {
		pass()
	}
	require.Equal(t, int64(1), reads.Load())
	require.Empty(t, mustImported(sink))
	require.Contains(t, reasonsFor(*reported, "state/runs/"+runA+"/manifest.json"),
		"manifest does not decode, the last one read stands: unexpected end of JSON input")
}

// countOpens counts the opens of the file at p until the test ends.
func countOpens(t *testing.T, p string) *atomic.Int64 {
	var n atomic.Int64
	open := openOS
	openOS = func(c *crewRoot, name string, flag int) (*os.File, error) {
		if name == p {
			n.Add(1)
		}
		return open(c, name, flag)
	}
	t.Cleanup(func() { openOS = open })
	return &n
}
