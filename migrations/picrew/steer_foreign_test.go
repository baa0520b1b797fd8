package picrew

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestASteeringLineUnderAnotherMailboxsMessageIsSkipped: pi-crew's broker writes a steer's message to the task's
// inbox, under the steering line's id (D§2.7), and a message id is its run's one message. A run's workers write its
// steering files: a line under the id of a message of another task's inbox, of the run's inbox or of an outbox, or of
// the message another task's steering line was given, was recorded as this task's steer.pushed naming that message,
// a steer this task never had. It is skipped and reported now, as a mailbox line under the id of another mailbox's
// message is; a line under its own task's message is imported as before. The one-shot import and a follower alike.
func TestASteeringLineUnderAnotherMailboxsMessageIsSkipped(t *testing.T) {
	root := t.TempDir()
	run := timesRunCreated
	msg := func(id, to string) string {
		return fmt.Sprintf(`{"id":%q,"runId":%q,"direction":"inbox","from":"orchestrator","to":%q,"taskId":%q,`+
			`"kind":"steer","body":"b","status":"queued","createdAt":1790928000000}`+"\n", id, run, to, to)
	}
	steerLine := func(id string) string {
		return `{"type":"steer","message":"the steer","id":"` + id + `","ts":1790928000000}` + "\n"
	}
	writeFiles(t, root, map[string]string{
		"state/runs/" + run + "/manifest.json": manifestOf(run, "completed"),
		"state/runs/" + run + "/tasks.json": `[{"id":"01_plan","stepId":"plan","role":"planner",` +
			`"status":"completed"},{"id":"02_exec","stepId":"exec","role":"executor","status":"completed"}]`,
		"state/runs/" + run + "/mailbox/inbox.jsonl":                msg("m_run", ""),
		"state/runs/" + run + "/mailbox/tasks/01_plan/inbox.jsonl":  msg("steer_own", "01_plan"),
		"state/runs/" + run + "/mailbox/tasks/02_exec/inbox.jsonl":  msg("steer_exec", "02_exec"),
		"state/runs/" + run + "/mailbox/tasks/02_exec/outbox.jsonl": msg("m_out", "02_exec"),
		"artifacts/" + run + "/steering/01_plan.jsonl": steerLine("steer_own") + steerLine("steer_exec") +
			steerLine("m_run") + steerLine("m_out") + steerLine("steer_lone"),
		"artifacts/" + run + "/steering/02_exec.jsonl": steerLine("steer_lone"),
	})
	one, followed, reports := importedTwice(t, root, valuesClock)
	require.Equal(t, recorded(t, one), recorded(t, followed), "the same events")
	ids := recorded(t, one)
	require.Contains(t, ids, "import:"+run+":steer:01_plan:steer_own")
	require.Contains(t, ids, "import:"+run+":steer:01_plan:steer_lone", "a line whose message is gone gets its own")
	for _, id := range []string{"steer_exec", "m_run", "m_out"} {
		require.NotContains(t, ids, "import:"+run+":steer:01_plan:"+id)
	}
	require.NotContains(t, ids, "import:"+run+":steer:02_exec:steer_lone")
	prefix := "artifacts/" + run + "/steering/"
	require.Equal(t, []string{
		prefix + `01_plan.jsonl:2: steer steer_exec of task 01_plan: its id is a message of 02_exec's ` +
			`mailbox: skipped (a message id is its run's one message)`,
		prefix + `01_plan.jsonl:3: steer m_run of task 01_plan: its id is a message of the run's inbox: skipped ` +
			`(a message id is its run's one message)`,
		prefix + `01_plan.jsonl:4: steer m_out of task 01_plan: its id is a message of the run's inbox: skipped ` +
			`(a message id is its run's one message)`,
		prefix + `02_exec.jsonl:1: steer steer_lone of task 02_exec: its id is a message of 01_plan's mailbox: ` +
			`skipped (a message id is its run's one message)`,
	}, withPrefix(reports, prefix))
}
