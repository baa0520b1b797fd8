package picrew

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/migrations/picrew/picrewtest"
)

// TestFollowResumesAnArchiveRotatedWhileDown: a live file (events.jsonl, a mailbox's inbox.jsonl) rotated to an
// archive while no follower ran leaves the archive without a checkpoint of its own: its checkpoint is the live
// file's, under the live file's name. A restarted follower read the archive from its start as new, every line of it
// decided and sent again (each answered replayed). The archive now takes over the live file's checkpoint when it is
// that file (the same inode, at least as long, the line read last where it was: as a checkpoint is resumed from), is
// read up to it only to rebuild the planner, and gets its own checkpoint; one that is not (rewritten in place since)
// is read from its start, and a hard link of the live file under an archive's name adds no write: nothing skipped,
// nothing twice.
func TestFollowResumesAnArchiveRotatedWhileDown(t *testing.T) {
	cases := map[string]struct {
		whileDown func(t *testing.T, a *picrewtest.Run)
		resumed   bool // the archives are resumed from the live files' checkpoints
		// reported is what is reported of each archive at the restart ("": nothing).
		reported string
	}{
		"rotated": {resumed: true, whileDown: func(t *testing.T, a *picrewtest.Run) {
			require.NoError(t, a.Rotate())
			rotateInbox(t, a, "02_exec", 1)
		}},
		"rotated, then rewritten in place": {reported: "rewritten since the last import (the last line read " +
			"differs): read again from the start (the command ids keep it from doubling)",
			whileDown: func(t *testing.T, a *picrewtest.Run) {
				require.NoError(t, a.Rotate())
				rotateInbox(t, a, "02_exec", 1)
				// NB: the same inode, longer, its lines read before no longer where they were.
				for _, p := range archives(t, a) {
					b, err := os.ReadFile(p)
					require.NoError(t, err)
					lines := strings.SplitAfter(strings.TrimSuffix(string(b), "\n"), "\n")
					require.NoError(t, os.WriteFile(p,
						[]byte("\n"+strings.Join(lines[1:], "")+"\n"+lines[0]+"\n"), 0o644))
				}
			}},
		"hard-linked under an archive's name": {resumed: true, whileDown: func(t *testing.T, a *picrewtest.Run) {
			require.NoError(t, os.Link(a.EventsPath(), a.EventsPath()+".1.archive.jsonl"))
			inbox := filepath.Join(a.Dir, "mailbox", "tasks", "02_exec", "inbox.jsonl")
			require.NoError(t, os.Link(inbox, inbox+".1.archive.jsonl"))
		}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			root := newRoot(t)
			a := newRun(t, root, runA)
			steps := picrewtest.Lifecycle(a, 40)
			runSteps(t, steps[:40])
			sink := newMemSink()
			_, pass, _ := stepFollower(t, root.Dir, sink)
			for range 3 {
				pass()
			}
			requireCopy(t, root.Dir, sink, copyOf{live: true})

			c.whileDown(t, a)
			runSteps(t, steps[40:50]) // still live
			fl, pass, reported := restartedFollower(t, root.Dir, sink)
			for range 3 {
				pass()
			}
			requireCopy(t, root.Dir, sink, copyOf{live: true})
			for _, p := range archives(t, a) {
				var want []string
				if c.reported != "" {
					want = []string{c.reported}
				}
				require.Equal(t, want, reasonsFor(*reported, relTo(root.Dir, p)))
			}
			st := fl.Stats()
			if !c.resumed {
				return
			}
			require.LessOrEqual(t, st.Replayed, uint64(3), "run.created and the tasks, sent again: %+v %v",
				st, *reported)
			cks, err := sink.Checkpoints(t.Context())
			require.NoError(t, err)
			var checkpointed []string
			for _, ck := range cks {
				checkpointed = append(checkpointed, ck.Path)
			}
			for _, p := range archives(t, a) {
				require.Contains(t, checkpointed, relTo(root.Dir, p), "the archive has a checkpoint of its own")
			}

			fl, pass, _ = restartedFollower(t, root.Dir, sink)
			pass()
			st = fl.Stats()
			require.Zero(t, st.Lines, "a second restart reads nothing as new: %+v", st)
			require.LessOrEqual(t, st.Replayed, uint64(3), "%+v", st)
		})
	}
}

// relTo is the path p relative to the crew root root, as a report or a checkpoint names it.
func relTo(root, p string) string {
	rel, _ := filepath.Rel(root, p)
	return filepath.ToSlash(rel)
}

// archives are the run's archives: of events.jsonl, and of its task mailboxes.
func archives(t *testing.T, a *picrewtest.Run) []string {
	t.Helper()
	var out []string
	for _, pattern := range []string{"events.jsonl.*.archive.jsonl", "mailbox/tasks/*/*.archive.jsonl"} {
		m, err := filepath.Glob(filepath.Join(a.Dir, filepath.FromSlash(pattern)))
		require.NoError(t, err)
		out = append(out, m...)
	}
	require.Len(t, out, 2)
	return out
}
