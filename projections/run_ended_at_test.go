package projections

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// TestRunEndedAtIsTheLastEnd: each of a run's three ends (completed, failed, cancelled) records its position
// (RunEndedAt), which a reopening keeps and a later end moves, and no other status sets; a snapshot keeps it.
func TestRunEndedAtIsTheLastEnd(t *testing.T) {
	for _, end := range []struct {
		typ     string
		payload any
	}{
		{events.TypeRunCompleted, &events.RunCompleted{}},
		{events.TypeRunFailed, &events.RunFailed{}},
		{events.TypeRunCancelled, &events.RunCancelled{}},
	} {
		var h history
		h.add(runR, events.TypeRunCreated, &events.RunCreated{Team: "t"})
		h.add(runR, events.TypeRunRunning, &events.RunRunning{})
		h.add(runR, events.TypeRunBlocked, &events.RunBlocked{})
		require.Zero(t, fold(h.evs).RunEndedAt(runR), "%s: a run that never ended", end.typ)
		first := h.add(runR, end.typ, end.payload)
		h.add(runR, events.TypeRunRunning, &events.RunRunning{})
		h.add(runR, events.TypeRunBlocked, &events.RunBlocked{})
		s := fold(h.evs)
		require.Equal(t, first.Position, s.RunEndedAt(runR), "%s: kept while reopened", end.typ)
		dec, err := DecodeSnapshot(mustEncode(t, s))
		require.NoError(t, err)
		require.Equal(t, first.Position, dec.RunEndedAt(runR), "%s: after a snapshot", end.typ)
		again := h.add(runR, end.typ, end.payload)
		require.Equal(t, again.Position, fold(h.evs).RunEndedAt(runR), "%s: the last end", end.typ)
	}
	require.Zero(t, New().RunEndedAt("nope"))
}
