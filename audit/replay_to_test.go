package audit_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/eventlog"
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

// TestReplayToInsideTheFirstDecision: a decision that opens the log (positions 1..3, one command's events) has no
// position before it to stop at: a stop inside it names the whole decision from position 1 and only the stop after
// it, where a refusal that did not look back to position 1 named a part of it and sent the operator to stop inside
// it.
func TestReplayToInsideTheFirstDecision(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	l, err := eventlog.Open(dir, nil)
	require.NoError(t, err)
	ev := eventlog.Event{Stream: "run-x", Type: "task.created", SchemaVersion: 1, Payload: []byte{0xc1}}
	_, err = l.Append(eventlog.Write{CommandID: "cmd-1", Events: []eventlog.Event{ev, ev, ev}})
	require.NoError(t, err)
	require.NoError(t, l.Close())
	l, err = audit.Open(dir)
	require.NoError(t, err)
	defer l.Close()

	for _, to := range []uint64{1, 2} {
		_, err := audit.Replay(l, audit.ReplayOptions{To: to, Explain: true})
		require.ErrorIs(t, err, audit.ErrInsideDecision, "to %d", to)
		require.ErrorContains(t, err, fmt.Sprintf("%d is inside the decision at positions 1..3; stop at 3", to))
		require.NotContains(t, err.Error(), " or ", "to %d: there is no stop before the first decision", to)
	}
}
