package picrew

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/migrations/picrew/picrewtest"
)

// rotateInbox renames the inbox of task taskID of run to an archive, as pi-crew's mailbox rotation does (D§2.6):
// the next message starts a new inbox.jsonl.
func rotateInbox(t *testing.T, run *picrewtest.Run, taskID string, n int) {
	t.Helper()
	p := filepath.Join(run.Dir, "mailbox", "tasks", taskID, "inbox.jsonl")
	require.NoError(t, os.Rename(p, p+"."+strconv.Itoa(n)+".archive.jsonl"))
}

// runningWithTask is a crew root whose run runA is running, with the one task taskID.
func runningWithTask(t *testing.T, taskID string) (*picrewtest.Root, *picrewtest.Run) {
	t.Helper()
	root := newRoot(t)
	a := newRun(t, root, runA)
	require.NoError(t, a.AddTask(taskID, "executor"))
	require.NoError(t, a.SetStatus("running"))
	return root, a
}

// sender is send, which appends a message (each with a body of its own) to the inbox of task taskID of run, and
// sent, the ids of those it appended, in order.
func sender(t *testing.T, run *picrewtest.Run, taskID string) (send func(), sent *[]string) {
	t.Helper()
	sent = new([]string)
	return func() {
		id, err := run.Message(taskID, "body "+strconv.Itoa(len(*sent)))
		require.NoError(t, err)
		*sent = append(*sent, id)
	}, sent
}

// messageIDs are the message ids of run's writes the sink recorded, in order.
func messageIDs(ids []string, run string) []string {
	var out []string
	for _, id := range withPrefix(ids, "import:"+run+":msg:") {
		out = append(out, strings.TrimPrefix(id, "import:"+run+":msg:"))
	}
	return out
}

// TestFollowReadsAMailboxsArchiveBeforeItsLiveFile: messages appended to a task's inbox.jsonl just before pi-crew
// renamed it aside to an archive, read by no pass before the rotation, are older than every message of the new
// inbox.jsonl. The follower read the live file first (its name sorts before its archives'), so it recorded the new
// file's messages before them. It reads a mailbox's archives before its live file now, each message once, whether
// the follower went on or was restarted from its checkpoints between its last read and the rotation.
func TestFollowReadsAMailboxsArchiveBeforeItsLiveFile(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run("restart="+strconv.FormatBool(restart), func(t *testing.T) {
			root, a := runningWithTask(t, "t1")
			message, sent := sender(t, a, "t1")
			message()
			message()
			sink := newMemSink()
			_, pass, reported := stepFollower(t, root.Dir, sink)
			for range 3 {
				pass() // read, sent and checkpointed
			}
			require.Len(t, messageIDs(mustImported(sink), runA), 2)
			if restart {
				_, pass, reported = restartedFollower(t, root.Dir, sink)
			}
			message() // appended to the live file, read by no pass
			message()
			rotateInbox(t, a, "t1", 1)
			message() // the new live file
			message()
			for range 4 {
				pass()
			}

			require.Equal(t, *sent, messageIDs(mustImported(sink), runA), "each message once, in the order sent")
			for _, s := range *reported {
				require.NotContains(t, s.Reason, "a message of that id", "%s: %s", s.Path, s.Reason)
			}
			requireCopy(t, root.Dir, sink, copyOf{live: true})
		})
	}
}

// TestImportReadsAMailboxsArchiveBeforeItsLiveFile: the one-shot import reads a mailbox's archives before its live
// file too: messages of one millisecond (their order the files') were recorded the live file's first.
func TestImportReadsAMailboxsArchiveBeforeItsLiveFile(t *testing.T) {
	root := newRoot(t)
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	root.Clock = func() time.Time { return at } // every message of one millisecond
	a := newRun(t, root, runA)
	require.NoError(t, a.AddTask("t1", "executor"))
	message, sent := sender(t, a, "t1")
	for i := range 6 {
		if i == 2 || i == 4 {
			rotateInbox(t, a, "t1", i)
		}
		message()
	}

	src := &source{root: root.Dir}
	r := src.readRun(runA, src.runDir(runA))
	require.NotNil(t, r)
	var ids []string
	for _, w := range newPlanner(src, r, time.Now).plan() {
		ids = append(ids, w.id)
	}
	require.Equal(t, *sent, messageIDs(ids, runA), "recorded in the order sent")
}

// TestFollowReadsAMailboxArchiveMadeAfterTheListingFirst: a rotation between a pass's listing of a mailbox and its
// read of inbox.jsonl leaves the messages appended just before it in an archive that pass never listed. The follower
// read the new live file from its start at once, and the archive's older messages at the next pass, after it. A live
// mailbox file replaced under a tail whose file no listed archive holds is read at the next pass now, whose listing
// finds the archive and reads it first, as for events.jsonl.
func TestFollowReadsAMailboxArchiveMadeAfterTheListingFirst(t *testing.T) {
	root, a := runningWithTask(t, "t1")
	message, sent := sender(t, a, "t1")
	message()
	sink := newMemSink()
	_, pass, _ := stepFollower(t, root.Dir, sink)
	pass()
	rotated := onceListed(t, filepath.Join(a.Dir, "mailbox", "tasks", "t1"), func() {
		message() // appended to the live file, read by no pass
		rotateInbox(t, a, "t1", 1)
		message() // the new live file
	})
	for range 4 {
		pass()
	}
	require.True(t, rotated())
	require.Equal(t, *sent, messageIDs(mustImported(sink), runA), "each message once, in the order sent")
	requireCopy(t, root.Dir, sink, copyOf{live: true})
}
