package picrew

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFollowerReadsALiveFileMadeAgain: a live file (a task's inbox.jsonl, events.jsonl) found in place of the one a
// follower read, with no archive of it listed, is left to the next pass (a rotation between the pass's listing and
// its read leaves the older lines in an archive the next listing finds). With notifications nothing brought that
// pass: a live file removed (renamed away), then made again by a rename, had its lines read only at the next poll.
// A pass that leaves a file so now brings the next one at once. The test follows with notifications and a poll too
// long to wake it.
func TestFollowerReadsALiveFileMadeAgain(t *testing.T) {
	root, a, fl, imported := followedByNotifications(t)

	inbox := filepath.Join(a.Dir, "mailbox", "tasks", "01_plan", "inbox.jsonl")
	// NB: renamed away, not removed: the new file must not take the old one's inode, freed.
	require.NoError(t, os.Rename(inbox, filepath.Join(root.Dir, "away.jsonl")))
	require.Eventually(t, func() bool { return len(fl.reported("01_plan/inbox.jsonl")) > 0 }, 10*time.Second,
		10*time.Millisecond, "the removal seen")
	// NB: made again whole by a rename: one notification, for one pass.
	fresh := filepath.Join(root.Dir, "fresh.jsonl")
	require.NoError(t, os.WriteFile(fresh, fmt.Appendf(nil, `{"id":"msg_again","runId":%q,"direction":"inbox",`+
		`"from":"orchestrator","to":"01_plan","taskId":"01_plan","body":"again",`+
		`"createdAt":"2026-12-01T12:00:00.000Z","status":"queued"}`+"\n", runA), 0o644))
	require.NoError(t, os.Rename(fresh, inbox))
	require.Eventually(t, imported("import:"+runA+":msg:msg_again"), 10*time.Second, 10*time.Millisecond,
		"the live file made again is read")
}
