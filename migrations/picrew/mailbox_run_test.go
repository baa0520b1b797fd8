package picrew

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/projections"
)

// TestAnotherRunsMailboxLineIsNotThisRuns: pi-crew names its run in every mailbox line it appends (D§2.6: runId, the
// manifest's, which its own reader requires). A run's workers write its mailbox, and lines of another run copied into
// it were recorded as this run's messages, delivered or acknowledged as this run's delivery.json says. A line naming
// another run is skipped and reported now, its reports bounded as a file's other bad lines are: its id is no message
// of this run, so the delivery state delivery.json holds under it records nothing, and a steering line under it gets
// a message of its own, as one whose message is gone. A line naming this run, or none, is read as before. The
// one-shot import and the follower record the same.
func TestAnotherRunsMailboxLineIsNotThisRuns(t *testing.T) {
	const copied = 2 * maxReportsPerFile // past the file's report bound
	root := t.TempDir()
	run := timesRunCreated
	line := func(id, runID, kind, body string) string {
		return fmt.Sprintf(`{"id":%q,%s"direction":"inbox","from":"orchestrator","to":"01_plan","taskId":"01_plan",`+
			`"kind":%q,"body":%q,"status":"queued","createdAt":1790928000000}`+"\n", id,
			optionalField("runId", runID), kind, body)
	}
	var inbox strings.Builder
	inbox.WriteString(line("m_own", run, "message", "mine"))
	inbox.WriteString(line("m_copied", runA, "message", "another run's"))
	inbox.WriteString(line("steer_copied", runA, "steer", "another run's steer"))
	for i := range copied {
		inbox.WriteString(line(fmt.Sprintf("m_copied_%d", i), runA, "message", "another run's"))
	}
	inbox.WriteString(line("m_unnamed", "", "message", "no run named"))
	writeFiles(t, root, map[string]string{
		"state/runs/" + run + "/manifest.json": manifestOf(run, "completed"),
		"state/runs/" + run + "/tasks.json": `[{"id":"01_plan","stepId":"plan",` +
			`"role":"planner","status":"completed"}]`,
		"state/runs/" + run + "/mailbox/tasks/01_plan/inbox.jsonl": inbox.String(),
		"state/runs/" + run + "/mailbox/delivery.json": `{"messages":{"m_own":"acknowledged",` +
			`"m_copied":"acknowledged","steer_copied":"delivered","m_unnamed":"delivered"},` +
			`"updatedAt":"2026-10-02T08:00:00.000Z"}`,
		"artifacts/" + run + "/steering/01_plan.jsonl": `{"type":"steer","message":"the steer",` +
			`"id":"steer_copied","ts":1790928000000}` + "\n",
	})
	one, followed, reports := importedTwice(t, root, valuesClock)
	requireOtherRunReports(t, reports, "state/runs/"+run+"/mailbox/tasks/01_plan/inbox.jsonl:")
	require.Equal(t, recorded(t, one), recorded(t, followed), "the same events")

	for name, l := range map[string]*eventlog.Log{"import": one, "follow": followed} {
		s := stateOf(t, l)
		m, ok := s.Message(run, "m_own")
		require.True(t, ok, name)
		require.Equal(t, projections.MessageAcknowledged, m.Status, name)
		m, ok = s.Message(run, "m_unnamed")
		require.True(t, ok, "%s: a line naming no run is this run's", name)
		require.Equal(t, projections.MessageDelivered, m.Status, name)
		for i := range copied {
			_, ok = s.Message(run, fmt.Sprintf("m_copied_%d", i))
			require.False(t, ok, name)
		}
		_, ok = s.Message(run, "m_copied")
		require.False(t, ok, "%s: another run's message is not this run's", name)
		m, ok = s.Message(run, "steer_copied")
		require.True(t, ok, "%s: the steering line gets a message of its own", name)
		require.Equal(t, "the steer", m.Body, name)
		require.Equal(t, projections.MessageQueued, m.Status,
			"%s: the delivery state of the line skipped is not its", name)
	}
}

// requireOtherRunReports requires reports to be those of more than maxReportsPerFile records of the file (its reports
// start with prefix) naming run runA: as many reports of them as the file's report bound allows, then one saying the
// others go unreported, and nothing else.
func requireOtherRunReports(t *testing.T, reports []string, prefix string) {
	t.Helper()
	var named, bound int
	for _, r := range reports {
		switch {
		case strings.Contains(r, "names run"):
			require.True(t, strings.HasPrefix(r, prefix), r)
			require.Contains(t, r, runA)
			named++
		case strings.Contains(r, "not reported"):
			bound++
		default:
			require.Fail(t, "unexpected report", r)
		}
	}
	require.Equal(t, maxReportsPerFile, named, "another run's records reported, within the file's report bound")
	require.Equal(t, 1, bound, "the rest said to go unreported")
}

// optionalField is the JSON member name: value, with the comma that follows it, or nothing for an empty value (a
// record without the field).
func optionalField(name, value string) string {
	if value == "" {
		return ""
	}
	return fmt.Sprintf(`%q:%q,`, name, value)
}
