package picrew

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/migrations/picrew/picrewtest"
)

// TestFollowReadsTheArchiveBeforeTheLiveFile: lines appended to events.jsonl just before pi-crew renamed it aside to
// an archive, read by no pass before the rotation, are older than every line of the new events.jsonl. The follower
// read the live file first (its name sorts first), so it reported the archive's unread seqs missing and recorded the
// new file's events before them: a delegation's settlement before its admission. It reads an archive's unread lines
// before the live file now, in seq order, each once, whether the follower went on or was restarted from its
// checkpoints between its last read and the rotation.
func TestFollowReadsTheArchiveBeforeTheLiveFile(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run("restart="+strconv.FormatBool(restart), func(t *testing.T) {
			root := newRoot(t)
			a := newRun(t, root, runA)
			steps := picrewtest.Lifecycle(a, 12)
			runSteps(t, steps[:14]) // up to the delegation's admission
			sink := newMemSink()
			fl, pass, reported := stepFollower(t, root.Dir, sink)
			for range 3 {
				pass() // read, sent and checkpointed
			}
			require.NotEmpty(t, fl.cks)
			read := a.Seq()
			if restart {
				_, pass, reported = restartedFollower(t, root.Dir, sink)
			}
			runSteps(t, steps[14:18]) // appended to the live file, read by no pass
			require.Greater(t, a.Seq(), read)
			require.NoError(t, a.Rotate())
			runSteps(t, steps[18:]) // the new live file: the settlement, the end
			for range 4 {
				pass()
			}

			requireReadInOrder(t, sink, *reported, a.Seq())
			requireCopy(t, root.Dir, sink, copyOf{})
		})
	}
}

// TestFollowReadsAnArchiveMadeAfterTheListingFirst: a rotation between a pass's listing of the run's files and its
// read of events.jsonl leaves the lines appended just before it in an archive that pass never listed. The follower
// read the new live file from its start at once, so it reported the archive's unread seqs missing and recorded the
// newer events before them. A live file replaced under a tail whose file no listed archive took over is read at the
// next pass now, whose listing finds the archive, if it is one, and reads it first.
func TestFollowReadsAnArchiveMadeAfterTheListingFirst(t *testing.T) {
	root := newRoot(t)
	a := newRun(t, root, runA)
	steps := picrewtest.Lifecycle(a, 12)
	runSteps(t, steps[:14])
	sink := newMemSink()
	_, pass, reported := stepFollower(t, root.Dir, sink)
	pass()
	rotated := onceListed(t, a.Dir, func() {
		runSteps(t, steps[14:18]) // appended to the live file, read by no pass
		require.NoError(t, a.Rotate())
		runSteps(t, steps[18:]) // the new live file
	})
	for range 4 {
		pass()
	}
	require.True(t, rotated())
	requireReadInOrder(t, sink, *reported, a.Seq())
	requireCopy(t, root.Dir, sink, copyOf{})
}

// requireReadInOrder checks that the sink recorded events 1..last of runA once each, in seq order, and that nothing
// was reported missing.
func requireReadInOrder(t *testing.T, sink *memSink, reported []Skipped, last uint64) {
	t.Helper()
	for _, s := range reported {
		require.NotContains(t, s.Reason, "missing", "%s: %s", s.Path, s.Reason)
	}
	var seqs []uint64
	for _, id := range mustImported(sink) {
		if rest, ok := strings.CutPrefix(id, "import:"+runA+":seq:"); ok {
			seq, err := strconv.ParseUint(rest, 10, 64)
			require.NoError(t, err, id)
			seqs = append(seqs, seq)
		}
	}
	require.IsIncreasing(t, seqs, "recorded in seq order")
	require.Len(t, seqs, int(last), "every event recorded")
	types := sink.eventTypes()
	require.Equal(t, 1, types[events.TypeDelegateAdmitted])
	require.Equal(t, 1, types[events.TypeDelegateCompleted])
}

// TestFollowReadsALiveFileReplacedAtEveryPass: a live events.jsonl (or mailbox file) found replaced is left to the
// next pass once, not at every pass it is found replaced again: a worker rewriting the file (a new inode) more often
// than the follower passes would keep its every line from being read.
func TestFollowReadsALiveFileReplacedAtEveryPass(t *testing.T) {
	files := map[string]struct {
		path   func(a *picrewtest.Run) string
		append func(a *picrewtest.Run) error
		prefix string
	}{
		"events.jsonl": {
			path: (*picrewtest.Run).EventsPath,
			append: func(a *picrewtest.Run) error {
				_, err := a.Event("task.progress", "", nil)
				return err
			},
			prefix: "import:" + runA + ":seq:",
		},
		"inbox.jsonl": {
			path: func(a *picrewtest.Run) string {
				return filepath.Join(a.Dir, "mailbox", "tasks", "t1",
					"inbox.jsonl")
			},
			append: func(a *picrewtest.Run) error {
				_, err := a.Message("t1", "body")
				return err
			},
			prefix: "import:" + runA + ":msg:",
		},
	}
	for name, file := range files {
		t.Run(name, func(t *testing.T) {
			root, a := runningWithTask(t, "t1")
			sink := newMemSink()
			_, pass, _ := stepFollower(t, root.Dir, sink)
			kept := t.TempDir()
			for i := range 8 {
				require.NoError(t, file.append(a))
				// The same lines under a new inode; the old file kept, so its inode is not the new one's.
				b, err := os.ReadFile(file.path(a))
				require.NoError(t, err)
				require.NoError(t, os.Rename(file.path(a), filepath.Join(kept, strconv.Itoa(i))))
				require.NoError(t, os.WriteFile(file.path(a), b, 0o644))
				pass()
			}
			require.GreaterOrEqual(t, len(withPrefix(mustImported(sink), file.prefix)), 4,
				"the live file read at every other pass at least")
		})
	}
}

// TestFollowReconcilesOnlyOnceTheArchiveIsRead: a pass that leaves a replaced live events.jsonl to the next (a
// rotation between its listing and its read) has not read the run's last events: a finished run is not reconciled
// with what it read, which would record as reconciled (from tasks.json and the manifest) the ends its unread events
// record.
func TestFollowReconcilesOnlyOnceTheArchiveIsRead(t *testing.T) {
	root := newRoot(t)
	a := newRun(t, root, runA)
	steps := picrewtest.Lifecycle(a, 12)
	n := len(steps)
	runSteps(t, steps[:n-3]) // up to the last task's end in tasks.json
	sink := newMemSink()
	_, pass, reported := stepFollower(t, root.Dir, sink)
	pass()
	runSteps(t, steps[n-1:]) // the run's end in its manifest
	rotated := onceListed(t, a.Dir, func() {
		runSteps(t, steps[n-3:n-2]) // task.completed, the rotation, then run.completed
		require.NoError(t, a.Rotate())
		runSteps(t, steps[n-2:n-1])
	})
	for range 6 {
		pass()
	}
	require.True(t, rotated())
	for _, s := range *reported {
		require.NotContains(t, s.Reason, "missing", "%s: %s", s.Path, s.Reason)
	}
	requireCopy(t, root.Dir, sink, copyOf{})
}

// onceListed runs change once, right after the reader's next listing of the directory dir returns: between its look
// at what is there and its reads of what it found, as a run's worker can. ran tells whether it did.
func onceListed(t *testing.T, dir string, change func()) (ran func() bool) {
	t.Helper()
	list := readDir
	done := false
	readDir = func(c *crewRoot, p string) ([]os.DirEntry, error) {
		entries, err := list(c, p)
		if p == dir && !done {
			done = true
			change()
		}
		return entries, err
	}
	t.Cleanup(func() { readDir = list })
	return func() bool { return done }
}
