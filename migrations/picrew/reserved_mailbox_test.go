package picrew

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// TestMailboxesAndSteeringFilesOfReservedNamesAreNotImported: a task mailbox directory (mailbox/tasks/<taskId>) and a
// steering file (steering/<taskId>.jsonl) are named by the task they hold messages for, and a run's workers write
// them. One named orchestrator, all, parent or group (events.TaskIDReserved: no task of the run has such an id, as a
// task of tasks.json so named is left out) put its messages in a mailbox under that name, which no task reads and
// msg.send reads as a group of mailboxes. Such a directory or file is not read and is reported, by the one-shot
// import and a follower alike; a task's own are imported as before.
func TestMailboxesAndSteeringFilesOfReservedNamesAreNotImported(t *testing.T) {
	root := t.TempDir()
	run := timesRunCreated
	msgLine := func(id, task string) string {
		return `{"id":"` + id + `","runId":"` + run +
			`","direction":"inbox","from":"orchestrator","taskId":"` + task +
			`","body":"b","createdAt":1790928000000,"status":"queued"}` + "\n"
	}
	steerLine := func(id string) string {
		return `{"type":"steer","message":"the steer","id":"` + id + `","ts":1790928000000}` + "\n"
	}
	reserved := []string{events.OrchestratorKey, events.RecipientAll, events.RecipientParent, events.RecipientGroup}
	files := map[string]string{
		"state/runs/" + run + "/manifest.json": manifestOf(run, "running"),
		"state/runs/" + run + "/tasks.json": `[{"id":"01_plan","stepId":"plan","role":"planner",` +
			`"status":"running"}]`,
		"state/runs/" + run + "/mailbox/tasks/01_plan/inbox.jsonl": msgLine("m-plan", "01_plan"),
		"artifacts/" + run + "/steering/01_plan.jsonl":             steerLine("s-plan"),
	}
	for _, name := range reserved {
		files["state/runs/"+run+"/mailbox/tasks/"+name+"/inbox.jsonl"] = msgLine("m-"+name, name)
		files["artifacts/"+run+"/steering/"+name+".jsonl"] = steerLine("s-" + name)
	}
	writeFiles(t, root, files)
	one, followed, reports := importedTwice(t, root, valuesClock)
	all := strings.Join(reports, "\n")
	for _, name := range reserved {
		require.Contains(t, all, "state/runs/"+run+"/mailbox/tasks/"+name+": ", "%s's mailbox reported", name)
		require.Contains(t, all, "artifacts/"+run+"/steering/"+name+".jsonl: ", "%s's steering file reported", name)
	}
	require.Len(t, reports, 2*len(reserved), "%q", reports)
	for name, l := range map[string]*eventlog.Log{"import": one, "follow": followed} {
		s := stateOf(t, l)
		for _, r := range reserved {
			_, ok := s.Message(run, "m-"+r)
			require.False(t, ok, "%s: the message of mailbox %s", name, r)
			_, ok = s.Message(run, "s-"+r)
			require.False(t, ok, "%s: the steer of %s", name, r)
		}
		for _, id := range []string{"m-plan", "s-plan"} {
			m, ok := s.Message(run, id)
			require.True(t, ok, "%s: %s", name, id)
			require.Equal(t, "01_plan", m.To, name)
		}
	}
}
