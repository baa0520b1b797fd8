package audit_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/audit/audittest"
)

// TestReplayToRefusesWhatItCannotAnswer: a replay that explains decisions
// stops after a whole decision, never inside the events one decision wrote
// together (the scenario's first delegation: requested, admitted and
// reserved at 8..10), where the cut admission would be re-run against part
// of its events and called drift; no replay stops past the head, where the
// head's state would be shown in its place. Both errors name what to use
// instead; a plain fold still stops anywhere up to the head.
func TestReplayToRefusesWhatItCannotAnswer(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	head := audittest.Scenario(t, dir)
	l, err := audit.Open(dir)
	require.NoError(t, err)
	defer l.Close()

	for _, to := range []uint64{8, 9} {
		_, err := audit.Replay(l, audit.ReplayOptions{To: to, Explain: true})
		require.ErrorIs(t, err, audit.ErrInsideDecision, "to %d", to)
		require.ErrorContains(t, err, "inside the decision at positions 8..10; stop at 7 or 10")
	}
	_, err = audit.Replay(l, audit.ReplayOptions{To: head + 1})
	require.ErrorIs(t, err, audit.ErrPastHead)
	require.ErrorContains(t, err, "past the head")

	res, err := audit.Replay(l, audit.ReplayOptions{To: 9})
	require.NoError(t, err)
	require.EqualValues(t, 9, res.State.Position)
	for _, to := range []uint64{7, 10, head} {
		res, err := audit.Replay(l, audit.ReplayOptions{To: to, Explain: true})
		require.NoError(t, err, "to %d", to)
		require.Equal(t, to, res.State.Position)
		require.Zero(t, res.Drift(), "to %d", to)
	}
}
