package events

// Budget ledger event types (D§4.4, pi-crew 0.11.46 semantics: the
// reservation is the spend, no refund, excess usage is charged at settle).
const (
	TypeBudgetReserved = "budget.reserved"
	TypeBudgetCharged  = "budget.charged"
)

// ImportTopUpSubID is the subId of the budget.reserved an import's reconcile records to bring a task's tokensSpent
// to what its source says (pi-crew's tasks.json allocation). The import's write carries that spend in Tokens, and
// what is recorded is what the task lacks of it given what the log holds, never below 0: the source's history may
// have lost (compacted) admissions whose reservations the log holds already, and counted again they overspent the
// run.
const ImportTopUpSubID = "import:picrew"

// BudgetReserved charges a metered admission's reservation to the parent
// task's allocation: tokensSpent += Tokens. It follows delegate.admitted in
// the same batch and is written for every metered admission, even with
// Tokens = 0.
//
// GrantedTokens is the grant in force (the parent's tokensGranted, or the
// run's budgetTotal when the parent had no allocation yet). It seeds the
// allocation on the first reservation; tokensGranted is write-once, so later
// values are informational only.
type BudgetReserved struct {
	TaskID        string `json:"taskId" msgpack:"taskId"`
	SubID         string `json:"subId" msgpack:"subId"`
	Tokens        int64  `json:"tokens" msgpack:"tokens"`
	GrantedTokens int64  `json:"grantedTokens" msgpack:"grantedTokens"`
}

// BudgetCharged charges self-reported usage above the reservation at
// settlement: Tokens = UsageTokens − ReservedTokens (> 0), added to the
// parent's tokensSpent. Only written when the excess is positive.
type BudgetCharged struct {
	TaskID         string `json:"taskId" msgpack:"taskId"`
	SubID          string `json:"subId" msgpack:"subId"`
	Tokens         int64  `json:"tokens" msgpack:"tokens"`
	UsageTokens    int64  `json:"usageTokens" msgpack:"usageTokens"`
	ReservedTokens int64  `json:"reservedTokens" msgpack:"reservedTokens"`
	// Uncharged is the excess the budget could not cover (nested budget
	// mode only: a charge never takes the parent past its grant). Tokens +
	// Uncharged = UsageTokens − ReservedTokens.
	Uncharged int64 `json:"uncharged,omitempty" msgpack:"uncharged,omitempty"`
}
