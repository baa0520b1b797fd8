package picrew

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
)

// TestMessageIDTakenTwiceIsReported: a message id is unique in its run (pi-crew's M1), and a message appears twice
// only as a compacted file's archive and the file itself, each time the same. A line of one mailbox file under the id
// of another file's message (a line a run's worker wrote, for another mailbox or with another body) was left out
// without a line saying so, by the one-shot import and a follower alike; whichever file sorts first stood, so a line
// in the run's inbox hid a message of a task's inbox. It is still left out, the first one kept, and now reported; the
// same message in an archive is not.
func TestMessageIDTakenTwiceIsReported(t *testing.T) {
	root := t.TempDir()
	run := timesRunCreated
	msg := func(id, body string) string {
		return `{"id":"` + id + `","from":"orchestrator","body":"` + body + `","createdAt":1790928000000}` + "\n"
	}
	writeFiles(t, root, map[string]string{
		"state/runs/" + run + "/manifest.json": manifestOf(run, "completed"),
		"state/runs/" + run + "/tasks.json": `[{"id":"01_plan","stepId":"plan","role":"planner",` +
			`"status":"completed"}]`, "state/runs/" + run + "/mailbox/inbox.jsonl": msg("m1", "forged") +
			msg("m2", "to the run"), "state/runs/" + run + "/mailbox/tasks/01_plan/inbox.jsonl": msg("m1",
			"real") + msg("m2", "to the run") +
			msg("m3", "mine"),
		"state/runs/" + run + "/mailbox/tasks/01_plan/inbox.jsonl.2026-10-02T08-00-00.archive.jsonl": msg("m3",
			"mine") +
			msg("m4", "other"),
		"state/runs/" + run + "/mailbox/tasks/01_plan/outbox.jsonl": msg("m4", "another"),
	})
	one, followed, reports := importedTwice(t, root, valuesClock)
	mailbox := "state/runs/" + run + "/mailbox/"
	require.Equal(t, []string{
		mailbox + "tasks/01_plan/inbox.jsonl:1: message m1: a message of that id is in " + mailbox +
			"inbox.jsonl already, in another mailbox or with another body: skipped (a message id is its run's " +
			"one message)", mailbox + "tasks/01_plan/inbox.jsonl:2: message m2: a message of that id is in " +
			mailbox + "inbox.jsonl already, " +
			"in another mailbox or with another body: skipped (a message id is its run's one message)",
		mailbox + "tasks/01_plan/outbox.jsonl:1: message m4: a message of that id is in " + mailbox +
			"tasks/01_plan/inbox.jsonl.2026-10-02T08-00-00.archive.jsonl already, in another mailbox or with " +
			"another body: skipped (a message id is its run's one message)",
	}, reports)
	for name, l := range map[string]*eventlog.Log{"import": one, "follow": followed} {
		s := stateOf(t, l)
		m, _ := s.Message(run, "m1")
		require.Equal(t, "forged", m.Body, "%s: the first one stands", name)
		m, _ = s.Message(run, "m3")
		require.True(t, strings.HasPrefix(m.Body, "mine"), name)
	}
}
