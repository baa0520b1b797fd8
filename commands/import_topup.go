package commands

import (
	"fmt"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// importedTopUp is a copy of r, an import's allocation top-up (events.TopUpOf), reserving what its task lacks of the
// spend the top-up carries (events.TopUpTokens), given spent, the task's tokensSpent before it.
func importedTopUp(r events.BudgetReserved, spent int64) *events.BudgetReserved {
	r.Tokens = events.TopUpTokens(r.Tokens, spent)
	return &r
}

// importedSpendProblem says what makes p, a budget.reserved or budget.charged given as a pointer or a struct (an
// allocation top-up too), a spend crewlog does not record: tokens outside 0..MaxUsageTokens (events.SpendTokensOK),
// or a reservation's grant outside 0..MaxBudgetTotal (events.BudgetTotalOK: the engine seeds a grant only from a
// budgetTotal or a reservation, and the first reservation of a task opens its account with the grant it carries);
// "" when there is nothing, or when p is another payload.
func importedSpendProblem(p any) string {
	var tokens int64
	if r := payloadAs[events.BudgetReserved](p); r != nil {
		if !events.BudgetTotalOK(r.GrantedTokens) {
			return fmt.Sprintf("grantedTokens must be an integer in 0..%d", int64(MaxBudgetTotal))
		}
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
		if t, n, ok := events.SpendOf(ev.Payload); ok && t == taskID {
			spent = events.AddSpend(spent, n)
		}
	}
	return spent
}
