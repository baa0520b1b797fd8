package picrew

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
)

// TestImportedTaskIDsAreOnesTaskCreateTakes: task.create refuses the ids msg.send reads as a group of mailboxes
// ("parent": the run inbox, "all": every workflow task, "group": a worker's live siblings) and the orchestrator's
// credential key, as crewd's import.append does: a task so named could never be sent a message of its own. A task of
// tasks.json so named, and a delegation whose subId (its shadow task's id) is one, are left out with their records,
// and a delegation or question line naming no task (an empty taskId: the run inbox's mailbox key) is skipped, each
// reported, by the one-shot import and a follower alike; every other task is imported.
func TestImportedTaskIDsAreOnesTaskCreateTakes(t *testing.T) {
	root := t.TempDir()
	run := timesRunCreated
	writeFiles(t, root, map[string]string{
		"state/runs/" + run + "/manifest.json": manifestOf(run, "running"),
		"state/runs/" + run + "/tasks.json": `[{"id":"parent","stepId":"a","role":"planner","status":"running"},` +
			`{"id":"all","stepId":"b","role":"planner","status":"queued"},` +
			`{"id":"group","stepId":"c","role":"planner","status":"queued"},` +
			`{"id":"orchestrator","stepId":"d","role":"planner","status":"queued"},` +
			`{"id":"01_plan","stepId":"plan","role":"planner","status":"running"}]`,
		"state/runs/" + run + "/events.jsonl": eventLine(1, "task.started", "parent", `{}`) +
			eventLine(2, "task.started", "01_plan", `{}`) +
			eventLine(3, "delegate.admitted", "01_plan", `{"subId":"group","reservedTokens":10,"timeoutSec":60}`) +
			eventLine(4, "delegate.requested", "", `{"subId":"gc-1","role":"explorer"}`) +
			eventLine(5, "ask.requested", "", `{"questionId":"q1"}`),
	})
	one, followed, reports := importedTwice(t, root, valuesClock)
	all := strings.Join(reports, "\n")
	for _, want := range []string{
		`task 0 has the id "parent", which names the run inbox, a group of tasks or the orchestrator: left out`,
		`task 1 has the id "all", which names the run inbox, a group of tasks or the orchestrator: left out`,
		`task 2 has the id "group", which names the run inbox, a group of tasks or the orchestrator: left out`,
		`task 3 has the id "orchestrator", which names the run inbox, a group of tasks or the orchestrator: left out`,
		`(seq 1): task.started names task "parent", not a workflow task of tasks.json: skipped`,
		`(seq 3): delegate.admitted for "group": an id that names the run inbox, a group of tasks or the ` +
			`orchestrator: skipped`, `(seq 4): delegate.requested names no task: skipped`,
		`(seq 5): ask.requested names no task: skipped`,
	} {
		require.Contains(t, all, want)
	}
	for name, l := range map[string]*eventlog.Log{"import": one, "follow": followed} {
		s := stateOf(t, l)
		require.Len(t, s.Tasks(run), 1, name)
		_, ok := s.Task(run, "01_plan")
		require.True(t, ok, name)
		require.Empty(t, s.Delegations(run), name)
		_, ok = s.Ask(run, "q1")
		require.False(t, ok, name)
	}
}
