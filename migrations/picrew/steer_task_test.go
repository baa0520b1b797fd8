package picrew

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestASteeringFileOfNoTaskIsSkipped: pi-crew's broker steers a task it found in tasks.json, as crewlog's own
// steer.push refuses a task the run does not have (no-task). A run's workers write its steering files: a file named
// for a task tasks.json lacks had each line recorded as a steer.pushed, and its message, naming a task the run does
// not have. Each such line is skipped and reported now, as an event line naming no task of tasks.json is, by the
// one-shot import and a follower alike; a steer of a task of tasks.json is imported as before.
func TestASteeringFileOfNoTaskIsSkipped(t *testing.T) {
	root := t.TempDir()
	run := timesRunCreated
	steerLine := func(id string) string {
		return `{"type":"steer","message":"the steer","id":"` + id + `","ts":1790928000000}` + "\n"
	}
	writeFiles(t, root, map[string]string{
		"state/runs/" + run + "/manifest.json": manifestOf(run, "completed"),
		"state/runs/" + run + "/tasks.json": `[{"id":"01_plan","stepId":"plan","role":"planner",` +
			`"status":"completed"}]`,
		"artifacts/" + run + "/steering/01_plan.jsonl":  steerLine("steer_own"),
		"artifacts/" + run + "/steering/09_ghost.jsonl": steerLine("steer_ghost") + `{"message":"legacy"}` + "\n",
	})
	one, followed, reports := importedTwice(t, root, valuesClock)
	require.Equal(t, recorded(t, one), recorded(t, followed), "the same events")
	ids := recorded(t, one)
	require.Contains(t, ids, "import:"+run+":steer:01_plan:steer_own")
	for id := range ids {
		require.NotContains(t, id, "09_ghost")
		require.NotContains(t, id, "steer_ghost")
	}
	prefix := "artifacts/" + run + "/steering/"
	require.Equal(t, []string{
		prefix + `09_ghost.jsonl:1: steer steer_ghost names task "09_ghost", not a task of tasks.json: skipped`,
		prefix + `09_ghost.jsonl:2: steer steer_import_09_ghost_2 names task "09_ghost", not a task of tasks.json: ` +
			`skipped`,
	}, withPrefix(reports, prefix))
}

// TestFollowerReadsATaskAddedBeforeItsSteeringFileIsListed: a follower's pass reads tasks.json, then lists the run's
// files: a task pi-crew added, and a steering file of it written, between the two had its line skipped for good, for
// naming no task of tasks.json. tasks.json is read again, once per read of a file, when a steering line names a task
// the tasks read lack, as for an event line, so the line is imported as the one-shot import of the same files does.
func TestFollowerReadsATaskAddedBeforeItsSteeringFileIsListed(t *testing.T) {
	root, r := runningPlanRun(t)
	steering := filepath.Join(root.Dir, "artifacts", runA, "steering")
	requireTaskAddedWhileListingIsRead(t, root.Dir, steering, func() string {
		// pi-crew adds the task, then steers it (a line without an id, which waits for no mailbox message).
		require.NoError(t, r.AddTask("02_exec", "executor"))
		require.NoError(t, os.WriteFile(filepath.Join(steering, "02_exec.jsonl"),
			[]byte(`{"type":"steer","message":"look again","ts":1790928000000}`+"\n"), 0o644))
		return "import:" + runA + ":steer:02_exec:steer_import_02_exec_1"
	})
}
