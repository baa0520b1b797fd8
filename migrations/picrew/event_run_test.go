package picrew

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/migrations/picrew/picrewtest"
)

// TestAnotherRunsEventLineIsNotThisRuns: every line pi-crew appends to a run's events.jsonl names that run (D§3.1:
// runId, the event being (runId, metadata.seq)). A run's workers write its directory, and lines of another run copied
// into its events.jsonl were recorded as this run's events: another run's delegations, questions and ends. A line
// naming another run is skipped and reported now, its reports bounded as a file's other bad lines are; a line naming
// this run, or none, is read as before. The one-shot import and the follower do the same.
func TestAnotherRunsEventLineIsNotThisRuns(t *testing.T) {
	const copied = 2 * maxReportsPerFile // past the file's report bound
	readers := map[string]func(t *testing.T, root string) (ids []string, reported []Skipped){
		"import": importPlan,
		"follower": func(t *testing.T, root string) ([]string, []Skipped) {
			sink, reported := followPasses(t, root, 3)
			return mustImported(sink), reported
		},
	}
	for name, read := range readers {
		t.Run(name, func(t *testing.T) {
			root := newRoot(t)
			b := newRun(t, root, runB)
			require.NoError(t, b.SetStatus("running"))
			var lines strings.Builder
			line := func(seq int, runID string) {
				named := ""
				if runID != "" {
					named = fmt.Sprintf(`"runId":%q,`, runID)
				}
				fmt.Fprintf(&lines, `{"time":"2026-12-01T12:00:00.000Z","type":"task.progress",%s"taskId":"01_plan",`+
					`"metadata":{"seq":%d}}`+"\n", named, seq)
			}
			line(1, runB)
			for seq := 2; seq < 2+copied; seq++ {
				line(seq, runA) // another run's lines, copied in
			}
			line(2+copied, "") // a line naming no run
			require.NoError(t, picrewtest.AppendRaw(b.EventsPath(), []byte(lines.String())))

			ids, reported := read(t, root.Dir)
			seqs := withPrefix(ids, "import:"+runB+":seq:")
			require.ElementsMatch(t, []string{"import:" + runB + ":seq:1",
				fmt.Sprintf("import:%s:seq:%d", runB, 2+copied)},
				seqs, "this run's line and the one naming no run, not another run's")
			var named, bound int
			for _, s := range reported {
				if s.Path != "state/runs/"+runB+"/events.jsonl" {
					continue
				}
				switch {
				case strings.Contains(s.Reason, "names run"):
					require.Contains(t, s.Reason, runA)
					require.Positive(t, s.Line)
					named++
				case strings.Contains(s.Reason, "not reported"):
					bound++
				}
			}
			require.Positive(t, named, "another run's line reported")
			require.LessOrEqual(t, named, maxReportsPerFile, "within the file's report bound")
			require.Equal(t, 1, bound, "the rest said to go unreported")
		})
	}
}
