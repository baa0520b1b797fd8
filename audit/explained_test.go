package audit

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
)

// explainedDecisions replays l with Explain and returns the decisions of the commands named, in log order.
func explainedDecisions(t *testing.T, l *eventlog.Log, kinds ...string) []Decision {
	t.Helper()
	res, err := Replay(l, ReplayOptions{Explain: true})
	require.NoError(t, err)
	var out []Decision
	for _, d := range res.Decisions {
		if slices.Contains(kinds, d.Command) {
			out = append(out, d)
		}
	}
	return out
}

// requireExplainedAtAlike requires ExplainAt, at the last event of each decision, to answer the decision the full
// replay gave.
func requireExplainedAtAlike(t *testing.T, l *eventlog.Log, ds []Decision) {
	t.Helper()
	for _, d := range ds {
		at, _, ok, err := ExplainAt(t.Context(), l, d.Last, nil)
		require.NoError(t, err)
		require.True(t, ok, "#%d", d.Position)
		require.Equal(t, d, at, "#%d", d.Position)
	}
}
