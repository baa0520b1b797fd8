package commands

import (
	"fmt"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// topUpOf is p, an import's allocation top-up (a budget.reserved of subId events.ImportTopUpSubID) given as a pointer
// or a struct; nil for any other payload. NB: the caller's payload: not to be changed.
func topUpOf(p any) *events.BudgetReserved {
	if r := payloadAs[events.BudgetReserved](p); r != nil && r.SubID == events.ImportTopUpSubID {
		return r
	}
	return nil
}

// importedTopUp is a copy of r, an import's allocation top-up (topUpOf), reserving what its task lacks of the spend
// the top-up carries, given spent, the task's tokensSpent before it (never below 0). NB: the importer plans the
// top-up from its source's history, which may have lost (compacted) admissions whose reservations the log holds
// already: counted again, they overspent the run, and its budget abort came early.
func importedTopUp(r events.BudgetReserved, spent int64) *events.BudgetReserved {
	r.Tokens = max(r.Tokens-max(spent, 0), 0)
	return &r
}

// importedSpend is what p, a budget.reserved or budget.charged given as a pointer or a struct, adds to its task's
// tokensSpent, and the task; "" for any other payload. NB: a negative amount adds nothing, as projections' addSpend
// folds it.
func importedSpend(p any) (taskID string, tokens int64) {
	if r := payloadAs[events.BudgetReserved](p); r != nil {
		return r.TaskID, max(r.Tokens, 0)
	}
	if c := payloadAs[events.BudgetCharged](p); c != nil {
		return c.TaskID, max(c.Tokens, 0)
	}
	return "", 0
}

// importedSpendProblem says what makes p, a budget.reserved or budget.charged given as a pointer or a struct (an
// allocation top-up too), a spend crewlog does not record: tokens outside 0..MaxUsageTokens (events.SpendTokensOK);
// "" when there is nothing, or when p is another payload.
func importedSpendProblem(p any) string {
	var tokens int64
	if r := payloadAs[events.BudgetReserved](p); r != nil {
		tokens = r.Tokens
	} else if c := payloadAs[events.BudgetCharged](p); c != nil {
		tokens = c.Tokens
	}
	if !events.SpendTokensOK(tokens) {
		return fmt.Sprintf("tokens must be an integer in 0..%d", int64(MaxUsageTokens))
	}
	return ""
}

// spentBefore is task taskID's tokensSpent in run runID given state s and the events out a write records before the
// one being decided.
func spentBefore(s *projections.State, runID, taskID string, out []events.Event) int64 {
	a, _ := s.Allocation(runID, taskID)
	spent := a.TokensSpent
	for _, ev := range out {
		if t, n := importedSpend(ev.Payload); t == taskID {
			spent = projections.SaturatingAdd(spent, n)
		}
	}
	return spent
}
