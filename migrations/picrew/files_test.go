package picrew

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// writerAfter guards a test that puts named pipes where files are read:
// opening one for reading without O_NONBLOCK waits for a writer, and the
// test would hang. After long (far more than such a test takes when
// nothing waits) it plays the writer of each pipe, again and again, so the
// test ends and fails saying so; waited tells whether it had to.
func writerAfter(t *testing.T, fifos ...string) (waited func() bool) {
	var fired atomic.Bool
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-stop:
			return
		case <-time.After(30 * time.Second):
		}
		fired.Store(true)
		for {
			for _, p := range fifos {
				if fd, err := syscall.Open(p, syscall.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					syscall.Close(fd)
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	return fired.Load
}

// twoRuns writes run A and run B with a file in every place the import
// reads: manifest.json, tasks.json, events.jsonl, a task's inbox,
// delivery.json and a steering file.
func twoRuns(t *testing.T) string {
	t.Helper()
	root := newRoot(t)
	for _, id := range []string{runA, runB} {
		r := newRun(t, root, id)
		require.NoError(t, r.AddTask("01_plan", "planner"))
		_, err := r.Event("task.progress", "01_plan", map[string]any{"n": 1})
		require.NoError(t, err)
		_, err = r.Message("01_plan", "hello from "+id)
		require.NoError(t, err)
		require.NoError(t, r.Steer("01_plan", "go on, "+id))
		require.NoError(t, r.SetStatus("running"))
	}
	return root.Dir
}

// runFiles are the files of run id the import reads, relative to the root.
func runFiles(id string) []string {
	return []string{
		"state/runs/" + id + "/manifest.json",
		"state/runs/" + id + "/tasks.json",
		"state/runs/" + id + "/events.jsonl",
		"state/runs/" + id + "/mailbox/delivery.json",
		"state/runs/" + id + "/mailbox/tasks/01_plan/inbox.jsonl",
		"artifacts/" + id + "/steering/01_plan.jsonl",
	}
}

// TestFollowerSkipsFilesThatAreNotRegular: pi-crew writes regular files. A
// named pipe in place of one of a run's files (or a symbolic link to one)
// made a reader wait for a writer that never comes: the one-shot import
// stopped there, and the follower, one goroutine for every run, followed
// no run at all. A link to a device, or to another run's file (whose lines
// would be imported as this run's), is no better. Each is reported, read
// as if it were not there, and every other file of the root is imported,
// by the one-shot import and by the follower alike.
func TestFollowerSkipsFilesThatAreNotRegular(t *testing.T) {
	for _, kind := range []struct {
		name   string
		reason string
		// make puts the thing at p; other is the same file of run B. It
		// returns the named pipe a reader could wait on ("" if none).
		make func(t *testing.T, p, other string) (fifo string)
	}{
		{"named pipe", "a named pipe, not a regular file: not read", func(t *testing.T, p, _ string) string {
			require.NoError(t, syscall.Mkfifo(p, 0o644))
			return p
		}},
		{"link to a named pipe", "a symbolic link, not a regular file: not read",
			func(t *testing.T, p, _ string) string {
				fifo := filepath.Join(t.TempDir(), "fifo")
				require.NoError(t, syscall.Mkfifo(fifo, 0o644))
				require.NoError(t, os.Symlink(fifo, p))
				return fifo
			}},
		{"link to a device", "a symbolic link, not a regular file: not read", func(t *testing.T, p, _ string) string {
			require.NoError(t, os.Symlink(os.DevNull, p))
			return ""
		}},
		{"link to run B's file", "a symbolic link, not a regular file: not read",
			func(t *testing.T, p, other string) string {
				require.NoError(t, os.Symlink(other, p))
				return ""
			}},
	} {
		for i, rel := range runFiles(runA) {
			t.Run(kind.name+" at "+filepath.Base(rel), func(t *testing.T) {
				root := twoRuns(t)
				p := filepath.Join(root, filepath.FromSlash(rel))
				require.NoError(t, os.Remove(p))
				absent, _ := importPlan(t, root)
				fifo := kind.make(t, p, filepath.Join(root, filepath.FromSlash(runFiles(runB)[i])))
				waited := writerAfter(t, fifo)

				ids, skipped := importPlan(t, root)
				sink, reported := followPasses(t, root, 3)
				require.False(t, waited(), "a reader waited on the named pipe for a writer")
				require.Equal(t, absent, ids, "the import reads the files as if %s were not there", rel)
				for way, skipped := range map[string][]Skipped{"import": skipped, "follow": reported} {
					require.True(t, slices.ContainsFunc(reasonsFor(skipped, rel), func(r string) bool {
						return strings.HasSuffix(r, ": "+kind.reason)
					}), "%s: %s reported as %s: %v", way, rel, kind.reason, reasonsFor(skipped, rel))
				}
				requireCopy(t, root, sink, copyOf{live: true})
				require.NotEmpty(t, withPrefix(ids, "import:"+runB+":"), "run B is imported")
			})
		}
	}
}

// TestWholeFileReadsAreBounded: manifest.json, tasks.json and
// delivery.json are read whole, and were read with no bound: a worker that
// made one 512 MiB long (a sparse file costs it nothing) cost the follower
// 1 GiB of allocation, and a link to /dev/zero never ended. One above
// maxWholeFile is reported and read as if it were not there, without a
// byte of it read, by the one-shot import and by the follower alike.
func TestWholeFileReadsAreBounded(t *testing.T) {
	for _, rel := range runFiles(runA) {
		if strings.HasSuffix(rel, ".jsonl") {
			continue // read in bounded steps (maxTailRead)
		}
		t.Run(filepath.Base(rel), func(t *testing.T) {
			root := twoRuns(t)
			p := filepath.Join(root, filepath.FromSlash(rel))
			require.NoError(t, os.Remove(p))
			absent, _ := importPlan(t, root)
			require.NoError(t, os.WriteFile(p, nil, 0o644))
			require.NoError(t, os.Truncate(p, maxWholeFile+1))

			var ids []string
			var skipped, reported []Skipped
			var sink *memSink
			byImport := allocatedBy(func() { ids, skipped = importPlan(t, root) })
			byFollow := allocatedBy(func() { sink, reported = followPasses(t, root, 3) })
			require.Less(t, byImport, uint64(maxWholeFile), "the import allocated %d bytes", byImport)
			require.Less(t, byFollow, uint64(maxWholeFile), "the follower allocated %d bytes", byFollow)
			require.Equal(t, absent, ids, "the import reads the files as if %s were not there", rel)
			requireCopy(t, root, sink, copyOf{live: true})
			reason := fmt.Sprintf("larger than the limit of %d bytes of a file pi-crew rewrites whole: not read",
				maxWholeFile)
			for way, skipped := range map[string][]Skipped{"import": skipped, "follow": reported} {
				require.True(t, slices.ContainsFunc(reasonsFor(skipped, rel), func(r string) bool {
					return strings.HasSuffix(r, ": "+reason)
				}), "%s: %s reported as too large: %v", way, rel, reasonsFor(skipped, rel))
			}
		})
	}
}

// TestReadFileLimit: readFile takes a regular file up to its limit, and
// refuses one above it: by its size before reading, or, for one that says
// it is smaller than it reads (a file that grows while read, or one of
// /proc, which all say 0 bytes), after limit+1 bytes.
func TestReadFileLimit(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		path    string
		content string
		err     string
	}{
		{name: "below the limit", content: "0123456789"[:9]},
		{name: "at the limit", content: "0123456789"},
		{name: "above the limit", content: "0123456789a", err: "larger than the limit of 10 bytes"},
		{name: "more than it says", path: "/proc/self/status", err: "larger than the limit of 10 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.path
			if p == "" {
				p = filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
				require.NoError(t, os.WriteFile(p, []byte(tc.content), 0o644))
			} else if _, err := os.Stat(p); err != nil {
				t.Skipf("no %s here", p)
			}
			b, _, err := (&crewRoot{dir: filepath.Dir(p)}).readFileLimit(p, 10)
			if tc.err != "" {
				var tooLarge *tooLargeError
				require.ErrorAs(t, err, &tooLarge)
				require.ErrorContains(t, err, tc.err)
				require.Equal(t, int64(11), tooLarge.size,
					"what was seen of it: its size, or the limit and one byte read")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.content, string(b))
		})
	}
}
