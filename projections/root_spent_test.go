package projections

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// TestRootSpentCountsWorkflowTasksAlone: the run pool's spend in nested budget mode (RootSpent) sums what the
// run's workflow tasks reserve and are charged, and what a task not created (yet) is, never what a delegation's
// shadow task spends: that comes out of the reservation its parent already counted; a snapshot keeps it.
func TestRootSpentCountsWorkflowTasksAlone(t *testing.T) {
	var h history
	fixture(&h, 0, true)
	admitBatch(&h, "gc-1", 100, true, 1_000)
	h.add(runR, events.TypeBudgetReserved, &events.BudgetReserved{TaskID: "gc-1", SubID: "gc-1a", Tokens: 30,
		GrantedTokens: 100})
	h.add(runR, events.TypeBudgetCharged, &events.BudgetCharged{TaskID: "gc-1", SubID: "gc-1a", Tokens: 5})
	h.add(runR, events.TypeBudgetCharged, &events.BudgetCharged{TaskID: taskP, SubID: "gc-1", Tokens: 7})
	h.add(runR, events.TypeBudgetReserved, &events.BudgetReserved{TaskID: "not-yet", SubID: "gc-9", Tokens: 11})
	s := fold(h.evs)
	require.Equal(t, int64(100+7+11), s.RootSpent(runR), "P's reservation and charge, and not-yet's; none of gc-1's")
	dec, err := DecodeSnapshot(mustEncode(t, s))
	require.NoError(t, err)
	require.Equal(t, int64(100+7+11), dec.RootSpent(runR), "after a snapshot")
	require.Zero(t, s.RootSpent("nope"))
}
