package picrew

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFollowerKeepsTheTasksReadBefore: a tasks.json that no longer decodes (rewritten with a value no JSON holds, by
// a run's worker, or cut), or that is no longer read (not a regular file, larger than maxWholeFile), leaves the tasks
// read before standing, as an undecodable manifest leaves the one read before, and is reported. The follower took a
// file that did not decode for a run without tasks: every task line read until tasks.json decoded again (a task's
// start, its end, its question) named no task of it and was skipped for good, its offset passed.
func TestFollowerKeepsTheTasksReadBefore(t *testing.T) {
	for name, c := range map[string]struct {
		write  func(t *testing.T, p string)
		reason string
	}{
		"does not decode": {
			write: func(t *testing.T, p string) {
				require.NoError(t, os.WriteFile(p, []byte(`[{"id":"01_plan",`), 0o644))
			},
			reason: "tasks.json does not decode, the tasks read before stand: unexpected end of JSON input",
		},
		"not a regular file": {
			write: func(t *testing.T, p string) {
				require.NoError(t, os.Remove(p))
				require.NoError(t, os.Mkdir(p, 0o755))
			},
			reason: "tasks.json not read, the tasks read before stand: a directory, not a regular file: not read",
		},
		"larger than a whole file may be": {
			write: func(t *testing.T, p string) { require.NoError(t, os.Truncate(p, maxWholeFile+1)) },
			reason: fmt.Sprintf("tasks.json not read, the tasks read before stand: larger than the limit of "+
				"%d bytes of a file pi-crew rewrites whole: not read", maxWholeFile),
		},
	} {
		t.Run(name, func(t *testing.T) {
			root := newRoot(t)
			a := newRun(t, root, runA)
			require.NoError(t, a.AddTask("01_plan", "planner"))
			require.NoError(t, a.SetStatus("running"))
			sink := newMemSink()
			_, pass, reported := stepFollower(t, root.Dir, sink)
			pass()
			c.write(t, filepath.Join(a.Dir, "tasks.json"))
			seq, err := a.Event("task.started", "01_plan", nil)
			require.NoError(t, err)
			pass()
			pass()
			ids, _ := sink.imported()
			require.Contains(t, ids, "import:"+runA+":seq:"+itoa(seq), "the task's start is imported")
			require.Equal(t, []string{c.reason}, reasonsFor(*reported, "state/runs/"+runA+"/tasks.json"))
		})
	}
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
