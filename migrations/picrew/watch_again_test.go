package picrew

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/migrations/picrew/picrewtest"
)

// TestFollowerWatchesADirectoryMadeAgain: a directory the follower watches (a task's mailbox, the run's mailbox, its
// steering directory) that is removed, renamed away or replaced by another renamed over it loses its watch, and the
// directory made again under its name was never watched: it was still listed as watched, so what was written in it
// woke the follower only at its next poll. It is watched again now, within the run's bound of task mailboxes
// (counted as watched only while they are), and what is written in it wakes the follower. The test follows with
// notifications and a poll too long to wake it.
func TestFollowerWatchesADirectoryMadeAgain(t *testing.T) {
	message := func(id string) []byte {
		return fmt.Appendf(nil, `{"id":%q,"runId":%q,"direction":"outbox","from":"01_plan","to":"orchestrator",`+
			`"taskId":"01_plan","body":"again","createdAt":"2026-12-01T12:00:00.000Z","status":"queued"}`+
			"\n", id, runA)
	}
	cases := map[string]struct {
		dir    string // the directory made again, under the run's directory (or the crew root, for steering)
		remake func(t *testing.T, root, dir string)
		// write writes the i-th line in the directory made again, which its run records under the write id
		// returned (default: a message in the task's outbox.jsonl).
		write func(t *testing.T, dir string, i int) (id string)
	}{
		"task mailbox removed": {dir: "mailbox/tasks/01_plan", remake: removeAndMake},
		"task mailbox renamed away": {dir: "mailbox/tasks/01_plan", remake: func(t *testing.T, root, dir string) {
			require.NoError(t, os.Rename(dir, filepath.Join(root, "moved")))
			require.NoError(t, os.Mkdir(dir, 0o755))
		}},
		"task mailbox replaced by a rename": {dir: "mailbox/tasks/01_plan", remake: renameOver("inbox.jsonl")},
		"mailbox removed": {dir: "mailbox/tasks/01_plan", remake: func(t *testing.T, root, dir string) {
			mailbox := filepath.Dir(filepath.Dir(dir))
			require.NoError(t, os.RemoveAll(mailbox))
			fresh := filepath.Join(root, "fresh")
			require.NoError(t, os.MkdirAll(filepath.Join(fresh, "tasks", "01_plan"), 0o755))
			require.NoError(t, os.Rename(fresh, mailbox)) // the tree at once: no directory of it made unwatched
		}},
		// NB: replaced, not removed and made again: the steering directory's parent is not watched, and made again
		// after a pass looked for it, it is watched at the next poll.
		"steering replaced by a rename": {dir: "artifacts/" + runA + "/steering", remake: renameOver("01_plan.jsonl"),
			write: func(t *testing.T, dir string, i int) string {
				require.NoError(t, picrewtest.AppendRaw(filepath.Join(dir, "01_plan.jsonl"),
					[]byte(`{"type":"steer","message":"again","ts":"2026-12-01T12:00:00.000Z"}`+"\n")))
				return fmt.Sprintf("import:%s:steer:01_plan:steer_import_01_plan_%d", runA, i) // a line without an id
			}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			root, a, fl, imported := followedByNotifications(t)
			wt := fl.f.watcher
			require.True(t, wt.active(), "the test follows with notifications")
			dir := filepath.Join(a.Dir, filepath.FromSlash(c.dir))
			if c.dir == "artifacts/"+runA+"/steering" {
				dir = filepath.Join(root.Dir, filepath.FromSlash(c.dir))
			}
			require.Eventually(t, func() bool { return slices.Contains(wt.w.WatchList(), dir) }, 10*time.Second,
				10*time.Millisecond, "watched at first")

			c.remake(t, root.Dir, dir)
			write := c.write
			if write == nil {
				write = func(t *testing.T, dir string, i int) string {
					// NB: a file the follower never read: one it read, made again, is another case
					// (TestFollowerReadsALiveFileMadeAgain).
					id := fmt.Sprintf("msg_again_%d", i)
					require.NoError(t, picrewtest.AppendRaw(filepath.Join(dir, "outbox.jsonl"), message(id)))
					return "import:" + runA + ":msg:" + id
				}
			}
			// NB: a line at a time until one wakes the follower: the test cannot tell when fsnotify has taken the
			// loss of the directory that was there, and a line written before the new one is watched is read only
			// if a pass comes after it.
			woke := false
			for i := 1; i <= 20 && !woke; i++ {
				want := write(t, dir, i)
				for wait := time.Now().Add(500 * time.Millisecond); !woke && time.Now().Before(wait); {
					woke = imported(want)()
					time.Sleep(10 * time.Millisecond)
				}
			}
			require.True(t, woke, "what is written in the directory made again wakes the follower")

			// What is listed as watched is, and the run's task mailboxes are counted as watched while they are.
			tasks := filepath.Join(a.Dir, "mailbox", "tasks")
			require.Eventually(t, func() bool {
				watching := wt.w.WatchList()
				wt.mu.Lock()
				defer wt.mu.Unlock()
				taskDirs := 0
				for d, run := range wt.dirs {
					if !slices.Contains(watching, d) {
						return false
					}
					if run == runA && filepath.Dir(d) == tasks {
						taskDirs++
					}
				}
				return len(wt.lost) == 0 && taskDirs == 1 && wt.tasks[runA] == taskDirs
			}, 10*time.Second, 10*time.Millisecond, "the directories listed as watched are those watched")
		})
	}
}

// followedByNotifications is a crew root with a running run (runA) of one task, 01_plan, sent a message and steered,
// followed with notifications and a poll too long to wake the follower, once the message is imported; imported
// tells whether the follower sent the write of a command id.
func followedByNotifications(t *testing.T) (root *picrewtest.Root, a *picrewtest.Run, fl *following,
	imported func(id string) func() bool) {
	t.Helper()
	root = newRoot(t)
	a = newRun(t, root, runA)
	require.NoError(t, a.AddTask("01_plan", "planner"))
	require.NoError(t, a.SetStatus("running"))
	msg, err := a.Message("01_plan", "hello")
	require.NoError(t, err)
	require.NoError(t, a.Steer("01_plan", "steer"))
	sink := newMemSink()
	o := fastFollow()
	o.Poll = time.Hour // only a notification wakes the follower
	fl = startFollow(t, root.Dir, sink, o)
	imported = func(id string) func() bool {
		return func() bool { ids, _ := sink.imported(); return slices.Contains(ids, id) }
	}
	require.Eventually(t, imported("import:"+runA+":msg:"+msg), 10*time.Second, 10*time.Millisecond)
	return root, a, fl, imported
}

// removeAndMake removes the directory dir and makes it again, empty.
func removeAndMake(t *testing.T, _, dir string) {
	require.NoError(t, os.RemoveAll(dir))
	require.NoError(t, os.Mkdir(dir, 0o755))
}

// renameOver empties the directory dir of its one file, name, and renames a new directory over it.
func renameOver(name string) func(t *testing.T, root, dir string) {
	return func(t *testing.T, root, dir string) {
		require.NoError(t, os.Remove(filepath.Join(dir, name)))
		fresh := filepath.Join(root, "fresh")
		require.NoError(t, os.Mkdir(fresh, 0o755))
		// NB: not os.Rename, which refuses to rename over a directory.
		require.NoError(t, syscall.Rename(fresh, dir))
	}
}
