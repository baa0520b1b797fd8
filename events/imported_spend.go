package events

import "math"

// The spend rules an import shares with the ledger: what a budget.reserved or budget.charged adds to its task's
// tokensSpent, and what an allocation top-up (ImportTopUpSubID) records. crewd's import.append (commands) and the
// one-shot importer (migrations/picrew, which may use neither commands nor projections) both count a write's spend
// with them, so a top-up records the same amount whichever of them appends it.

// TopUpOf is p, an import's allocation top-up (a budget.reserved of subId ImportTopUpSubID) given as a pointer or a
// struct; nil for any other payload. NB: the caller's payload (or a copy of a struct): not to be changed.
func TopUpOf(p any) *BudgetReserved {
	if r := PayloadAs[BudgetReserved](Event{Payload: p}); r != nil && r.SubID == ImportTopUpSubID {
		return r
	}
	return nil
}

// TopUpTokens is what an allocation top-up carrying target tokens records for a task whose tokensSpent is held: what
// the task lacks of target, never below 0. NB: the importer plans the top-up from its source's history, which may
// have lost (compacted) admissions whose reservations the log holds already: counted again, they overspent the run.
func TopUpTokens(target, held int64) int64 { return max(max(target, 0)-max(held, 0), 0) }

// SpendOf is what p, a budget.reserved or budget.charged given as a pointer or a struct, adds to its task's
// tokensSpent, and the task; ok is false for any other payload. NB: a negative amount adds nothing (AddSpend).
func SpendOf(p any) (taskID string, tokens int64, ok bool) {
	e := Event{Payload: p}
	if r := PayloadAs[BudgetReserved](e); r != nil {
		return r.TaskID, max(r.Tokens, 0), true
	}
	if c := PayloadAs[BudgetCharged](e); c != nil {
		return c.TaskID, max(c.Tokens, 0), true
	}
	return "", 0, false
}

// AddSpend is spent + tokens as the ledger folds a spend: a negative amount (which no decision writes) adds nothing,
// so a spend never decreases, and the sum stops at the largest int64 rather than wrapping to a negative spend that
// handed the budget back.
func AddSpend(spent, tokens int64) int64 {
	if tokens <= 0 {
		return spent
	}
	return min(spent, math.MaxInt64-tokens) + tokens
}
