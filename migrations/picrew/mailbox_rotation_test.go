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
			root := newRoot(t)
			a := newRun(t, root, runA)
			require.NoError(t, a.AddTask("t1", "executor"))
			require.NoError(t, a.SetStatus("running"))
			var sent []string
			message := func() {
				id, err := a.Message("t1", "body "+strconv.Itoa(len(sent)))
				require.NoError(t, err)
				sent = append(sent, id)
			}
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

			require.Equal(t, sent, messageIDs(mustImported(sink), runA), "each message once, in the order sent")
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
	var sent []string
	for i := range 6 {
		if i == 2 || i == 4 {
			rotateInbox(t, a, "t1", i)
		}
		id, err := a.Message("t1", "body "+strconv.Itoa(i))
		require.NoError(t, err)
		sent = append(sent, id)
	}

	src := &source{root: root.Dir}
	r := src.readRun(runA, src.runDir(runA))
	require.NotNil(t, r)
	var ids []string
	for _, w := range newPlanner(src, r, time.Now).plan() {
		ids = append(ids, w.id)
	}
	require.Equal(t, sent, messageIDs(ids, runA), "recorded in the order sent")
}
