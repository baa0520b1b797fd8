package commands

import (
	"context"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// TestImportedTopUpRecordsWhatTheTaskLacks: an import's allocation top-up (events.ImportTopUpSubID) carries the spend
// its task's record shows, and records what the task lacks of it given what the log holds: its importer's history
// may have lost (compacted) the admissions whose reservations the log holds, which counted again overspent the run.
func TestImportedTopUpRecordsWhatTheTaskLacks(t *testing.T) {
	f := openEngine(t, vfs.NewMem(), newTestClock(), nil)
	spent := func() int64 {
		var a projections.Allocation
		f.eng.Read(func(s *projections.State) { a, _ = s.Allocation("R", "T") })
		return a.TokensSpent
	}
	topUp := func(id string, tokens int64) Request {
		return importOf("R", id, events.TypeBudgetReserved,
			&events.BudgetReserved{TaskID: "T", SubID: events.ImportTopUpSubID, Tokens: tokens, GrantedTokens: 1000})
	}
	for _, req := range []Request{
		importOf("R", "import:R:run", events.TypeRunCreated, &events.RunCreated{Team: "t", Goal: "g", Cwd: "/w"}),
		importOf("R", "import:R:task:T", events.TypeTaskCreated,
			&events.TaskCreated{TaskID: "T", StepID: "s", Kind: events.TaskKindWorkflow}),
		importOf("R", "import:R:seq:2", events.TypeBudgetReserved,
			&events.BudgetReserved{TaskID: "T", SubID: "gc-1", Tokens: 100, GrantedTokens: 1000}),
	} {
		r, err := f.eng.Submit(context.Background(), req)
		require.NoError(t, err)
		require.Nil(t, r.Rejected)
	}
	for _, tc := range []struct {
		id           string
		tokens, want int64
	}{
		{"import:R:reconcile:allocation:T:100", 100, 100}, // the log holds it all: nothing more
		{"import:R:reconcile:allocation:T:80", 80, 100},   // less than the log holds: spend never decreases
		{"import:R:reconcile:allocation:T:150", 150, 150}, // what the log lacks of 150
	} {
		r, err := f.eng.Submit(context.Background(), topUp(tc.id, tc.tokens))
		require.NoError(t, err)
		require.Nil(t, r.Rejected)
		require.Equal(t, tc.want, spent(), tc.id)
	}
	// Any other reservation is recorded as it is.
	r, err := f.eng.Submit(context.Background(), importOf("R", "import:R:seq:9", events.TypeBudgetReserved,
		&events.BudgetReserved{TaskID: "T", SubID: "gc-2", Tokens: 5, GrantedTokens: 1000}))
	require.NoError(t, err)
	require.Nil(t, r.Rejected)
	require.Equal(t, int64(155), spent())
}
