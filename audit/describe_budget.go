package audit

import (
	"fmt"

	"github.com/crewlog/crewlog/events"
)

// chargeCapped says why a charge left some of a usage uncharged (nested budget mode).
const chargeCapped = "a charge stops at what the parent may still spend"

// describeBudget tells the ledger: a reservation is the spend (no refund),
// a charge is usage above the reservation, less what the parent's grant
// could not cover (nested budget mode).
func describeBudget(ev events.Event) string {
	switch ev.Type {
	case events.TypeBudgetReserved:
		if p := events.PayloadAs[events.BudgetReserved](ev); p != nil {
			return fmt.Sprintf("budget reserved %d for %s from %s (grant %d)", p.Tokens, p.SubID, p.TaskID, p.GrantedTokens)
		}
	case events.TypeBudgetCharged:
		if p := events.PayloadAs[events.BudgetCharged](ev); p != nil {
			s := fmt.Sprintf("budget charged %d over the reservation to %s (used %d, reserved %d)",
				p.Tokens, p.TaskID, p.UsageTokens, p.ReservedTokens)
			if p.Uncharged > 0 {
				s += fmt.Sprintf(", %d uncharged: %s", p.Uncharged, chargeCapped)
			}
			return s
		}
	}
	return ev.Type
}
