package picrew

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
)

// TestLegacySteerOfALongTaskIDSaysItsIDIsDerived: a steering line without an id (a legacy entry, D§2.7) is
// imported under an id derived from its task and its line, steer_import_<taskId>_<line>. A steering file's name is
// its task id, which a run's workers choose, and for one of 242 chars or more the derived id is longer than any id
// crewlog records: the line was reported as one whose id is too long, though it had none. Its report says now that
// the line has no id and names the id derived for it. A line whose own id is too long is reported as before, and a
// line of a short task id is imported under the id derived today.
func TestLegacySteerOfALongTaskIDSaysItsIDIsDerived(t *testing.T) {
	root := t.TempDir()
	run := timesRunCreated
	long := strings.Repeat("t", 242)
	steerLine := func(id string) string {
		return `{"type":"steer","message":"the steer",` + optionalField("id", id) + `"ts":1790928000000}` + "\n"
	}
	writeFiles(t, root, map[string]string{
		"state/runs/" + run + "/manifest.json": manifestOf(run, "running"),
		"state/runs/" + run + "/tasks.json": `[{"id":"01_plan","stepId":"plan","role":"planner",` +
			`"status":"running"}]`,
		"artifacts/" + run + "/steering/" + long + ".jsonl": steerLine(""),
		"artifacts/" + run + "/steering/01_plan.jsonl":      steerLine("") + steerLine(strings.Repeat("s", 257)),
	})
	one, followed, reports := importedTwice(t, root, valuesClock)
	require.Len(t, reports, 2, "%q", reports)
	derived := "steer_import_" + long + "_1"
	for _, r := range reports {
		switch {
		case strings.HasPrefix(r, "artifacts/"+run+"/steering/"+long+".jsonl:1: "):
			require.Contains(t, r, "without an id", "the line had none")
			require.Contains(t, r, "derived")
			require.Contains(t, r, clip(derived), "the id derived for it")
			require.NotContains(t, r, "its id is longer")
		case strings.HasPrefix(r, "artifacts/"+run+"/steering/01_plan.jsonl:2: "):
			require.Contains(t, r, "its id is longer than", "a line's own id too long, as before")
		default:
			require.Fail(t, "unexpected report", r)
		}
	}
	for name, l := range map[string]*eventlog.Log{"import": one, "follow": followed} {
		s := stateOf(t, l)
		m, ok := s.Message(run, "steer_import_01_plan_1")
		require.True(t, ok, "%s: a short task's legacy line keeps the id derived today", name)
		require.Equal(t, "the steer", m.Body, name)
	}
}
