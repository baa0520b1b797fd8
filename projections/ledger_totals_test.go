package projections

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// TestLedgerTotals sums every account of each run as a copy of the ledger
// would, saturating, and reads them in place: no allocation, whatever the
// accounts' histories hold.
func TestLedgerTotals(t *testing.T) {
	s := fold(realisticHistory(5000))
	runs := runIDs(t, s)
	require.NotEmpty(t, runs)
	counted := false
	for _, run := range append(runs, "nope") {
		var granted, spent int64
		for _, a := range s.Ledger(run) {
			granted, spent = SaturatingAdd(granted, a.TokensGranted), SaturatingAdd(spent, a.TokensSpent)
		}
		counted = counted || granted > 0 && spent > 0
		g, sp := s.LedgerTotals(run)
		require.Equal(t, []int64{granted, spent}, []int64{g, sp}, run)
		require.Zero(t, testing.AllocsPerRun(5, func() { s.LedgerTotals(run) }), run)
	}
	require.True(t, counted, "some run grants and spends")

	var h history
	fixture(&h, 0, true)
	for _, task := range []string{taskP, "03_other"} {
		h.add(runR, events.TypeBudgetCharged, &events.BudgetCharged{TaskID: task, SubID: "gc-" + task,
			Tokens: math.MaxInt64})
	}
	_, spent := fold(h.evs).LedgerTotals(runR)
	require.Equal(t, int64(math.MaxInt64), spent, "saturates")
}
