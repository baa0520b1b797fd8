package picrew

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/projections"
)

// TestAnotherRunsTaskIsNotThisRuns: pi-crew names its run in every task record it writes to tasks.json (D§2.3 and
// D§2.5: runId, the manifest's, for a workflow task and a shadow alike). A run's workers write its tasks.json, and
// records of another run copied into it were recorded as this run's tasks, their statuses, usage and allocations
// with them; one under the id of a task of this run, read first, stood for it. A record naming another run is skipped
// and reported now, its reports bounded as a file's other bad items are; a record naming this run, or none, is read
// as before. The one-shot import and the follower record the same.
func TestAnotherRunsTaskIsNotThisRuns(t *testing.T) {
	const copied = 2 * maxReportsPerFile // past the file's report bound
	root := t.TempDir()
	run := timesRunCreated
	record := func(id, runID, step, status string) string {
		return fmt.Sprintf(`{"id":%q,%s%s"role":"executor","agent":"executor","status":%q,"cwd":"/srv/app",`+
			`"dependsOn":[],"finishedAt":1790928000000,"usage":{"input":7,"output":7}}`, id,
			optionalField("runId", runID), optionalField("stepId", step), status)
	}
	records := []string{
		record("01_plan", runA, "plan", "failed"), // another run's task of this id, before this run's own
		record("01_plan", run, "plan", "completed"),
		record("02_copied", runA, "build", "completed"),
		record("gc-copied", runA, "", "running"),
	}
	for i := range copied {
		records = append(records, record(fmt.Sprintf("%02d_copied", i+10), runA, "build", "completed"))
	}
	records = append(records, record("03_unnamed", "", "test", "completed"))
	writeFiles(t, root, map[string]string{
		"state/runs/" + run + "/manifest.json": manifestOf(run, "completed"),
		"state/runs/" + run + "/tasks.json":    "[" + strings.Join(records, ",") + "]",
	})
	one, followed, reports := importedTwice(t, root, valuesClock)
	requireOtherRunReports(t, reports, "state/runs/"+run+"/tasks.json:")
	require.Equal(t, recorded(t, one), recorded(t, followed), "the same events")

	for name, l := range map[string]*eventlog.Log{"import": one, "follow": followed} {
		s := stateOf(t, l)
		st, ok := s.TaskStatus(run, "01_plan")
		require.True(t, ok, name)
		require.Equal(t, projections.TaskCompleted, st,
			"%s: this run's own task, not another run's under its id", name)
		st, ok = s.TaskStatus(run, "03_unnamed")
		require.True(t, ok, "%s: a task naming no run is this run's", name)
		require.Equal(t, projections.TaskCompleted, st, name)
		for _, id := range []string{"02_copied", "gc-copied", "10_copied", fmt.Sprintf("%02d_copied", copied+9)} {
			_, ok = s.Task(run, id)
			require.False(t, ok, "%s: another run's task %s is not this run's", name, id)
		}
		require.Len(t, s.Tasks(run), 2, name)
	}
}
