package httpapi

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/projections"
)

// TestARunsPageIsChargedTheSummariesItRead: a read-only token's page of runs without a search was charged one unit,
// though a page whose status takes in the ended runs reads the summaries of the cold ones from the index on disk and
// decodes those not cached (up to 5,000 a page; a goal may be 256K characters), so a token paging the finished runs
// in a loop had crewd read them for one unit a page. A page is now charged one more unit per 4 KiB of the summaries
// it read; a page that reads no index (no ended status, or every ended run hot) still costs one unit.
func TestARunsPageIsChargedTheSummariesItRead(t *testing.T) {
	const every = 1 << 20
	for _, tc := range []struct {
		name, query string
		retention   time.Duration
		summaries   int // of the index the page reads, newest first: every one, or none
	}{
		{"the ended runs, cold", "?status=completed&status=failed&status=cancelled", -1, every},
		{"every run, the ended ones cold", "?newest=true", -1, every},
		{"the newest ended run, cold", "?status=completed&newest=true&limit=1", -1, 2}, // and the next, for the cursor
		{"no ended status", "?status=running&status=queued&status=blocked", -1, 0},
		{"the ended runs, hot", "?status=completed", 100000 * time.Hour, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pacer := newFakePacer()
			f := newFixtureEngine(t, Options{Pacer: pacer},
				commands.Options{SnapshotEvery: -1, ExpiryInterval: -1, Retention: tc.retention})
			for i := range 6 {
				run := fmt.Sprintf("long-%d", i)
				r := f.do(audittest.Admin, &commands.RunCreate{RunID: run, Team: "Long", Workflow: "Wide",
					Goal: strings.Repeat("A Goal ", 5<<10), Cwd: "/srv/long"})
				require.Nil(t, r.Rejected, "%v", r.Rejected)
				for _, to := range []string{"running", "completed"} {
					r = f.do(audittest.Orchestrator, &commands.RunTransition{RunID: run, To: to})
					require.Nil(t, r.Rejected, "%v", r.Rejected)
				}
			}
			var cold, total int
			var pos uint64
			f.eng.Read(func(st *projections.State) {
				cold, total, pos = st.ColdRuns(), st.ColdRuns()+st.HotRuns(), st.Position
			})
			require.Less(t, total, 100, "every run on one page")
			summaries, read := 0, 0 // the summaries the index holds, and the bytes of those the page reads
			_, err := f.log.Summaries(uint64(total-1), true, pos, func(s eventlog.Summary) bool {
				if summaries++; summaries <= tc.summaries {
					read += len(s.Stream) + len(s.Data)
				}
				return true
			})
			require.NoError(t, err)
			if tc.retention < 0 {
				require.GreaterOrEqual(t, cold, 6, "the long runs went cold")
				require.Greater(t, summaries, 6)
			} else {
				require.Zero(t, cold, "every run is hot")
			}
			if tc.summaries > 0 {
				require.Greater(t, read/(4<<10), 10, "the summaries the page reads are more than a few units")
			}
			page := requireRO(t, f, "/api/v1/runs"+tc.query)
			require.Equal(t, tc.summaries == 2, page["hasMore"], "a page of every run but the newest's")
			want := 1 + read/(4<<10)
			ro := keyReadOnlyPrefix + digestOf(roToken)
			awaitTurns(t, f.srv.reads, ro, 0, 0)
			require.Equal(t, map[string][]int{ro: {want}}, pacer.charges())
		})
	}
}
