package commands

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/projections"
)

// A run id names the run's stream, which the log bounds (eventlog.MaxStreamLen): run.create refuses a longer one
// with its own message rather than deciding a run the log then refuses.
func TestRunCreateRunIDFitsItsStream(t *testing.T) {
	for _, tc := range []struct {
		n  int
		ok bool
	}{{1, true}, {eventlog.MaxStreamLen, true}, {eventlog.MaxStreamLen + 1, false}, {MaxIDChars + 1, false}} {
		dec, err := Decide(projections.New(), &RunCreate{RunID: strings.Repeat("r", tc.n), Team: "t", Goal: "g",
			Cwd: "/w"}, fxEnv())
		if tc.ok {
			require.NoError(t, err, "%d", tc.n)
			require.Len(t, dec.Events, 1)
			continue
		}
		fxRejected(t, dec, err, CodeBadParams, "invalid-params",
			"run.create: runId must be 1..255 chars of [A-Za-z0-9_-]")
	}
}

// budgetTotal is an integer of at most 2^53, as the protocol description says: a JavaScript runtime reads the run
// back as a number, and a larger total would come back as another one.
func TestRunCreateBudgetTotalBound(t *testing.T) {
	for _, tc := range []struct {
		total int64
		ok    bool
	}{{0, true}, {MaxBudgetTotal, true}, {MaxBudgetTotal + 1, false}, {1<<63 - 1, false}, {-1, false}} {
		total := tc.total
		dec, err := Decide(projections.New(), &RunCreate{RunID: "r", Team: "t", Goal: "g", Cwd: "/w",
			BudgetTotal: &total}, fxEnv())
		if tc.ok {
			require.NoError(t, err, "%d", tc.total)
			require.Len(t, dec.Events, 1)
			continue
		}
		fxRejected(t, dec, err, CodeBadParams, "invalid-params",
			"run.create: budgetTotal must be an integer in 0..9007199254740992")
	}
}
