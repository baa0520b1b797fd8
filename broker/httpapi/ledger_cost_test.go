package httpapi

import (
	"math"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/commands"
)

// TestLedgerListCopiesNoHistory: the dashboard's list of a run's accounts counts each account's reservations and
// charges, and sends neither; reading it copies none of them: a worker whose metered delegations filled its account
// (a reservation and a charge each) made every read of the list copy them all under the engine's read lock.
func TestLedgerListCopiesNoHistory(t *testing.T) {
	f := newFixture(t, Options{})
	const run, task, n = "ledger-run", "01_many", 1000
	f.do(audittest.Admin, &commands.RunCreate{RunID: run, Team: "t", Goal: "g", Cwd: "/w",
		BudgetTotal: new(int64(100_000_000))})
	f.do(audittest.Orchestrator, &commands.RunTransition{RunID: run, To: "running"})
	f.do(audittest.Orchestrator, &commands.TaskCreate{RunID: run, TaskID: task, Role: "executor", Agent: "a",
		Title: task, Cwd: "/w"})
	f.do(audittest.Orchestrator, &commands.TaskTransition{RunID: run, TaskID: task, To: "running"})
	for range n {
		r := f.do(audittest.Worker(task), &commands.DelegateRequest{RunID: run, TaskID: task, Prompt: "look",
			BudgetTokens: new(int64(7))})
		require.Nil(t, r.Rejected)
		sub := r.Value.(*commands.DelegateResult).GrandchildTaskRef
		r = f.do(audittest.Orchestrator, &commands.DelegateSettle{RunID: run, SubID: sub, Outcome: "ok", Text: "done",
			UsageTokens: new(int64(9))})
		require.Nil(t, r.Rejected)
	}
	path := "/api/v1/runs/" + run + "/ledger"
	f.ok(path) // NB: the connection and its buffers made, before measuring
	// NB: the least of three reads: TotalAlloc counts the whole process, whose other goroutines may allocate during
	// one read; a copy of the history costs every read.
	least, acc := uint64(math.MaxUint64), map[string]any(nil)
	for range 3 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		acc = f.ok(path)["accounts"].([]any)[0].(map[string]any)
		runtime.ReadMemStats(&after)
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	require.EqualValues(t, n, acc["reservationCount"])
	require.EqualValues(t, n, acc["chargeCount"])
	require.EqualValues(t, n*9, acc["tokensSpent"])
	require.NotContains(t, acc, "reservations")
	// NB: the history is 2,000 entries, about 100 KB as a copy; the list of one account, a few KB.
	require.Less(t, least, uint64(48<<10), "bytes allocated to read the list")
}
