package commands

import (
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// budget is what the ledger says about a parent task at admission (SPEC §4.2,
// pi-crew 0.11.46):
//
//   - metered iff the run is not budgetUnlimited and the parent has an
//     allocation or the run has a budgetTotal (a defined 0 included: a
//     grant of 0);
//   - the grant is the allocation's tokensGranted, or, when the parent has
//     none yet, the seed: the run's budgetTotal in picrew mode; in nested
//     mode, for a shadow task, the reservation its parent made for it;
//   - a metered admission reserves budgetTokens (default 0), and the
//     reservation is the spend: no refund, ever.
//
// In nested mode (events.BudgetModeNested) the run's workflow tasks also
// share one pool: what a workflow task may still reserve is bounded by
// budgetTotal minus the spend of every workflow task of the run (pool,
// poolSpent). A shadow task spends out of its own grant, which its parent
// already counted, so every token leaves the run's budgetTotal once.
type budget struct {
	metered bool
	granted int64
	spent   int64
	// nested reports that the pool bounds remaining (a workflow task in
	// nested mode).
	nested    bool
	pool      int64
	poolSpent int64
}

// remaining is what a metered admission may still reserve, and what a
// nested-mode settlement may still charge.
func (b budget) remaining() int64 {
	r := b.granted - b.spent
	if b.nested {
		r = min(r, b.pool-b.poolSpent)
	}
	return r
}

// meter is the budget of task taskID of run at admission, under the budget
// mode of cfg.
func meter(s *projections.State, run projections.Run, taskID string, cfg projections.Config) budget {
	if run.BudgetUnlimited {
		return budget{}
	}
	nested := cfg.BudgetMode == events.BudgetModeNested
	total, defined := run.Budget()
	var b budget
	if a, ok := s.Allocation(run.RunID, taskID); ok {
		b = budget{metered: true, granted: a.TokensGranted, spent: a.TokensSpent}
	} else if nested && s.IsShadow(run.RunID, taskID) {
		// The shadow's grant is what its parent reserved for it; an
		// unmetered delegation gives its shadow no budget to meter.
		d, ok := s.Delegation(run.RunID, taskID)
		if !ok || !d.Metered {
			return budget{}
		}
		return budget{metered: true, granted: d.Reserved}
	} else if defined {
		b = budget{metered: true, granted: total}
	} else {
		return budget{}
	}
	if nested && defined && !s.IsShadow(run.RunID, taskID) {
		b.nested, b.pool, b.poolSpent = true, total, s.RootSpent(run.RunID)
	}
	return b
}
