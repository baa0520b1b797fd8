package picrew

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
)

// TestDelegationAndQuestionLinesNameATaskOfTheRun: pi-crew's broker admits a delegation, settles it and parks a
// question only for the task its caller's token names once that task is found in tasks.json (a workflow task, or a
// delegation's shadow, which it adds there first); only its request and its rejection (no-task, nesting disabled) are
// written before the task is looked up. A run's workers write its events.jsonl: an admission, a settlement or a
// question naming a task tasks.json lacks was recorded for a task the run does not have, a budget account and a
// question nobody could answer with it. Such a line is skipped and reported, as a task event naming no task of
// tasks.json is; a request or a rejection naming one is imported as pi-crew wrote it. The one-shot import and a
// follower alike.
func TestDelegationAndQuestionLinesNameATaskOfTheRun(t *testing.T) {
	root := t.TempDir()
	run := timesRunCreated
	writeFiles(t, root, map[string]string{
		"state/runs/" + run + "/manifest.json": manifestOf(run, "running"),
		"state/runs/" + run + "/tasks.json": `[{"id":"01_plan","stepId":"plan","role":"planner",` +
			`"status":"running"},{"id":"gc-1","role":"explorer","status":"running"}]`,
		"state/runs/" + run + "/events.jsonl": eventLine(1, "task.started", "01_plan", `{}`) +
			eventLine(2, "delegate.requested", "ghost", `{"subId":"gc-9","role":"explorer"}`) +
			eventLine(3, "delegate.rejected", "ghost", `{"subId":"gc-9","reason":"no-task"}`) +
			eventLine(4, "delegate.admitted", "ghost", `{"subId":"gc-2","reservedTokens":10,"timeoutSec":60}`) +
			eventLine(5, "delegate.completed", "ghost", `{"subId":"gc-2","ok":true}`) +
			eventLine(6, "ask.requested", "ghost", `{"questionId":"q-ghost","timeoutSec":60}`) +
			eventLine(7, "ask.answered", "ghost", `{"questionId":"q-ghost"}`) +
			eventLine(8, "delegate.admitted", "01_plan", `{"subId":"gc-1","reservedTokens":10,"timeoutSec":60}`) +
			eventLine(9, "ask.requested", "gc-1", `{"questionId":"q-shadow","timeoutSec":60}`) +
			eventLine(10, "delegate.completed", "ghost", `{"subId":"gc-1","ok":true}`),
	})
	one, followed, reports := importedTwice(t, root, valuesClock)
	all := strings.Join(reports, "\n")
	for _, want := range []string{
		`(seq 4): delegate.admitted names task "ghost", not a task of tasks.json: skipped`,
		`(seq 5): delegate.completed names task "ghost", not a task of tasks.json: skipped`,
		`(seq 6): ask.requested names task "ghost", not a task of tasks.json: skipped`,
		`(seq 7): ask.answered names task "ghost", not a task of tasks.json: skipped`,
		`(seq 10): delegate.completed names task "ghost", not a task of tasks.json: skipped`,
	} {
		require.Contains(t, all, want)
	}
	require.NotContains(t, all, "(seq 2)", "pi-crew writes a request before it looks the task up")
	require.NotContains(t, all, "(seq 3)", "and rejects it as no-task")
	for name, l := range map[string]*eventlog.Log{"import": one, "follow": followed} {
		s := stateOf(t, l)
		dels := s.Delegations(run)
		require.Len(t, dels, 1, name)
		require.Equal(t, "gc-1", dels[0].SubID, name)
		require.Equal(t, "01_plan", dels[0].ParentTaskID, name)
		_, ok := s.Ask(run, "q-ghost")
		require.False(t, ok, name)
		_, ok = s.Ask(run, "q-shadow")
		require.True(t, ok, name, "a delegation's shadow is a task of tasks.json: its question is asked")
		ids := recorded(t, l)
		require.Contains(t, ids, "import:"+run+":seq:2", name)
		require.Contains(t, ids, "import:"+run+":seq:3", name)
	}
}
