package picrew

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestATaskMailboxOfNoTaskIsSkipped: crewlog's msg.send appends to the mailbox of a task of its run, or to the run's
// inbox (parent), and pi-crew's broker writes a task's inbox for a task it found in tasks.json. A run's workers write
// its mailbox files: a task inbox directory named for a task tasks.json lacks had each line recorded as a message in
// the mailbox of a task the run does not have, with its delivery states. Each such line is skipped and reported now,
// as a steering line of such a task is, by the one-shot import and a follower alike, and a line of a task of
// tasks.json under the same id is imported as the message it is. The task's outbox is the run's inbox, which stays.
func TestATaskMailboxOfNoTaskIsSkipped(t *testing.T) {
	root := t.TempDir()
	run := timesRunCreated
	line := func(id, taskID, direction string) string {
		return `{"id":"` + id + `","runId":"` + run + `","direction":"` + direction + `","from":"orchestrator",` +
			`"to":"` + taskID + `","taskId":"` + taskID + `","body":"hello","createdAt":1790928000000,` +
			`"status":"queued"}` + "\n"
	}
	tasks := "state/runs/" + run + "/mailbox/tasks/"
	writeFiles(t, root, map[string]string{
		"state/runs/" + run + "/manifest.json": manifestOf(run, "completed"),
		"state/runs/" + run + "/tasks.json": `[{"id":"01_plan","stepId":"plan","role":"planner",` +
			`"status":"completed"},{"id":"09_plan","stepId":"plan2","role":"planner","status":"completed"}]`,
		tasks + "01_plan/inbox.jsonl": line("msg_own", "01_plan", "inbox"),
		tasks + "05_ghost/inbox.jsonl": line("msg_ghost", "05_ghost", "inbox") +
			line("msg_shared", "05_ghost", "inbox"),
		tasks + "05_ghost/outbox.jsonl": line("msg_out", "05_ghost", "outbox"),
		tasks + "09_plan/inbox.jsonl":   line("msg_shared", "09_plan", "inbox"),
		"state/runs/" + run + "/mailbox/delivery.json": `{"messages":{"msg_ghost":"acknowledged",` +
			`"msg_shared":"delivered"}}`,
	})
	one, followed, reports := importedTwice(t, root, valuesClock)
	require.Equal(t, recorded(t, one), recorded(t, followed), "the same events")
	ids := recorded(t, one)
	for _, id := range []string{"msg:msg_own", "msg:msg_out", "msg:msg_shared", "delivery:msg_shared:delivered"} {
		require.Contains(t, ids, "import:"+run+":"+id)
	}
	for id := range ids {
		require.NotContains(t, id, "msg_ghost")
	}
	require.Equal(t, []string{
		tasks + `05_ghost/inbox.jsonl:1: message msg_ghost is in the inbox of task "05_ghost", not a task of ` +
			`tasks.json: skipped`,
		tasks + `05_ghost/inbox.jsonl:2: message msg_shared is in the inbox of task "05_ghost", not a task of ` +
			`tasks.json: skipped`,
	}, withPrefix(reports, tasks))
}

// TestFollowerReadsATaskAddedBeforeItsMailboxIsListed: a follower's pass reads tasks.json, then lists the run's
// files: a task pi-crew added, and a message to it written, between the two had its line skipped for good, for being
// in the inbox of no task of tasks.json. tasks.json is read again, as for a steering line, so the line is imported
// as the one-shot import of the same files does; while tasks.json cannot be read, the line waits.
func TestFollowerReadsATaskAddedBeforeItsMailboxIsListed(t *testing.T) {
	root, r := runningPlanRun(t)
	tasksDir := filepath.Join(root.Dir, "state", "runs", runA, "mailbox", "tasks")
	requireTaskAddedWhileListingIsRead(t, root.Dir, tasksDir, func() string {
		// pi-crew adds the task, then writes to its inbox.
		require.NoError(t, r.AddTask("02_exec", "executor"))
		id, err := r.Message("02_exec", "look again")
		require.NoError(t, err)
		return "import:" + runA + ":msg:" + id
	})
}
