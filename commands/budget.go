package commands

import "github.com/crewlog/crewlog/projections"

// budget is what the ledger says about a parent task at admission (SPEC §4.2,
// pi-crew 0.11.46):
//
//   - metered iff the run is not budgetUnlimited and the parent has an
//     allocation or the run has a budgetTotal;
//   - the grant is the allocation's tokensGranted, or, when the parent has
//     none yet, the run's budgetTotal (the seed, written once by the first
//     budget.reserved and never changed after);
//   - a metered admission reserves budgetTokens (default 0), and the
//     reservation is the spend: no refund, ever.
type budget struct {
	metered bool
	granted int64
	spent   int64
}

func meter(s *projections.State, run projections.Run, taskID string) budget {
	if run.BudgetUnlimited {
		return budget{}
	}
	if a, ok := s.Allocation(run.RunID, taskID); ok {
		return budget{metered: true, granted: a.TokensGranted, spent: a.TokensSpent}
	}
	if run.BudgetTotal > 0 {
		return budget{metered: true, granted: run.BudgetTotal}
	}
	return budget{}
}
