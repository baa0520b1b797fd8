package broker

import (
	"math"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLedgerPageCopiesNoHistoryItOmits: a worker whose delegations fill its account's history (1,000 metered
// delegations: 2,000 entries) makes every page of query.ledger that holds the account send it without its history
// (historyOmitted), as before; but reading that page copies none of the history, under the engine's read lock, nor
// encodes it to learn it does not fit: it cost the whole history each time — its orchestrator's every page, charged
// one unit, a copy and an encoding of up to the run's every metered delegation.
func TestLedgerPageCopiesNoHistoryItOmits(t *testing.T) {
	f := newFixture(t, fixtureOpts{opts: Options{MaxFrame: 16 << 10}})
	o, p := f.meteredRun()
	const n = 1000
	settledDelegations(o, p, n)

	read := func() map[string]any {
		accounts := o.ok("query.ledger", nil)["accounts"].([]any)
		require.Len(t, accounts, 1)
		return accounts[0].(map[string]any)
	}
	read() // NB: the connection's buffers grown, and the engine's published state settled, before measuring
	// NB: the least of three reads: TotalAlloc counts the whole process, whose other goroutines may allocate during
	// one read; a copy of the history costs every read.
	least, acct := uint64(math.MaxUint64), map[string]any(nil)
	for range 3 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		acct = read()
		runtime.ReadMemStats(&after)
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	require.Equal(t, true, acct["historyOmitted"])
	require.Nil(t, acct["reservations"])
	require.Nil(t, acct["charges"])
	require.EqualValues(t, n*9, acct["tokensSpent"], "the totals are whole")
	// NB: the history is 2,000 entries, over 100 KB as a copy and 150 KB encoded; the page, a few KB.
	require.Less(t, least, uint64(32<<10), "bytes allocated to read the page")
}
