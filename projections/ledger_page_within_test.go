package projections

import (
	"math"
	"runtime"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// TestLedgerPageWithinCopiesNoLongHistory: LedgerPageWithin gives every account LedgerPage gives, whole while its
// history holds at most the bound's entries, else without it (its totals and counts whole, HistoryOmitted); and reading an
// account past the bound copies none of its history, however long: a page costs the page, not the run.
func TestLedgerPageWithinCopiesNoLongHistory(t *testing.T) {
	var h history
	fixture(&h, 0, true)
	const n = 5000
	for i := range n {
		sub := "gc-" + strconv.Itoa(i)
		admitBatch(&h, sub, 7, true, 1<<40)
		settleBatch(&h, sub, events.TypeDelegateCompleted, 7, 9)
	}
	s := fold(h.evs)
	whole, err := s.LedgerPage(runR, PageFilter{})
	require.NoError(t, err)
	require.Len(t, whole.Items, 1)
	require.Len(t, whole.Items[0].Reservations, n)
	require.Len(t, whole.Items[0].Charges, n)

	for _, most := range []int{2 * n, math.MaxInt} {
		within, err := s.LedgerPageWithin(runR, PageFilter{}, most)
		require.NoError(t, err)
		require.Equal(t, []AccountInPage{{Account: whole.Items[0], ReservationCount: n, ChargeCount: n}}, within.Items,
			most)
	}
	omitted := whole.Items[0]
	omitted.Reservations, omitted.Charges = nil, nil
	for _, most := range []int{0, 2*n - 1} {
		within, err := s.LedgerPageWithin(runR, PageFilter{}, most)
		require.NoError(t, err)
		require.Equal(t, []AccountInPage{{Account: omitted, HistoryOmitted: true, ReservationCount: n, ChargeCount: n}},
			within.Items, most)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, _ = s.LedgerPageWithin(runR, PageFilter{}, most)
		runtime.ReadMemStats(&after)
		require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<10), "bytes allocated for a page of one account")
	}
}
