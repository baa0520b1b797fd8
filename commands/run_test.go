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
		dec, err := Decide(projections.New(), &RunCreate{RunID: strings.Repeat("r", tc.n), Team: "t", Goal: "g", Cwd: "/w"}, fxEnv())
		if tc.ok {
			require.NoError(t, err, "%d", tc.n)
			require.Len(t, dec.Events, 1)
			continue
		}
		fxRejected(t, dec, err, CodeBadParams, "invalid-params", "run.create: runId must be 1..255 chars of [A-Za-z0-9_-]")
	}
}
