package projections

import "github.com/crewlog/crewlog/events"

// Account is a task's delegation budget ledger (D§4.4): the source of the
// task's allocation. Invariants, by construction of the fold:
// TokensSpent = Reserved + Charged = Σ Reservations + Σ Charges; TokensSpent
// never decreases; TokensGranted is set once, when the account opens. Every
// sum saturates at MaxInt64 and ignores a negative amount (which no decision
// writes), so no log, however malformed, makes a spend go down.
type Account struct {
	RunID         string        `json:"runId" msgpack:"runId"`
	TaskID        string        `json:"taskId" msgpack:"taskId"`
	TokensGranted int64         `json:"tokensGranted" msgpack:"tokensGranted"`
	TokensSpent   int64         `json:"tokensSpent" msgpack:"tokensSpent"`
	Reserved      int64         `json:"reserved" msgpack:"reserved"`
	Charged       int64         `json:"charged" msgpack:"charged"`
	Reservations  []Reservation `json:"reservations" msgpack:"reservations"`
	Charges       []Charge      `json:"charges" msgpack:"charges"`
}

// Reservation is one metered admission's reservation (budget.reserved).
type Reservation struct {
	SubID  string `json:"subId" msgpack:"subId"`
	Tokens int64  `json:"tokens" msgpack:"tokens"`
	At     int64  `json:"at" msgpack:"at"`
}

// Charge is one settlement's excess usage (budget.charged).
type Charge struct {
	SubID          string `json:"subId" msgpack:"subId"`
	Tokens         int64  `json:"tokens" msgpack:"tokens"`
	UsageTokens    int64  `json:"usageTokens" msgpack:"usageTokens"`
	ReservedTokens int64  `json:"reservedTokens" msgpack:"reservedTokens"`
	At             int64  `json:"at" msgpack:"at"`
}

// AccountInPage is an account as a page of the ledger gives it (LedgerPageWithin): whole, or, when its history holds
// more entries than the page copies, without it — Reservations and Charges nil, and HistoryOmitted. Its counts are
// its history's, given or not.
type AccountInPage struct {
	Account
	HistoryOmitted   bool `json:"historyOmitted,omitempty"`
	ReservationCount int  `json:"-"`
	ChargeCount      int  `json:"-"`
}

// Remaining is what a metered admission may still reserve.
func (a Account) Remaining() int64 { return a.TokensGranted - a.TokensSpent }

func (a *Account) clone() *Account {
	c := *a
	c.Reservations = cloneSlice(a.Reservations)
	c.Charges = cloneSlice(a.Charges)
	return &c
}

// account returns taskID's account, opening it with grant when it has none:
// that is the write-once seeding of tokensGranted.
func (r *runState) account(taskID string, grant int64) *Account {
	a := r.accounts[taskID]
	if a == nil {
		a = &Account{RunID: r.run.RunID, TaskID: taskID, TokensGranted: grant}
		r.addAccount(a)
	}
	return a
}

func (r *runState) addAccount(a *Account) {
	r.accounts[a.TaskID] = a
	r.accountOrder = append(r.accountOrder, a.TaskID)
}

func applyLedger(r *runState, ev events.Event) {
	at := ev.UnixMilli()
	switch ev.Type {
	case events.TypeBudgetReserved:
		if p := events.PayloadAs[events.BudgetReserved](ev); p != nil {
			a := r.account(p.TaskID, p.GrantedTokens)
			a.Reservations = append(a.Reservations, Reservation{SubID: p.SubID, Tokens: p.Tokens, At: at})
			a.Reserved = events.AddSpend(a.Reserved, p.Tokens)
			a.TokensSpent = events.AddSpend(a.TokensSpent, p.Tokens)
			r.countRootSpend(p.TaskID, p.Tokens)
		}
	case events.TypeBudgetCharged:
		if p := events.PayloadAs[events.BudgetCharged](ev); p != nil {
			// NB: a charge only follows a metered admission, whose
			// reservation opened the account; opening one here (grant 0)
			// only keeps a malformed log from losing the charge.
			a := r.account(p.TaskID, 0)
			a.Charges = append(a.Charges, Charge{SubID: p.SubID, Tokens: p.Tokens, UsageTokens: p.UsageTokens,
				ReservedTokens: p.ReservedTokens, At: at})
			a.Charged = events.AddSpend(a.Charged, p.Tokens)
			a.TokensSpent = events.AddSpend(a.TokensSpent, p.Tokens)
			r.countRootSpend(p.TaskID, p.Tokens)
		}
	}
}

// RootSpent is the run pool's spend in nested budget mode: Σ of the
// reservations and charges of run runID's workflow (non-shadow) tasks; a
// shadow task spends out of the reservation its parent already counted.
// O(1): the fold counts each amount as it is written (an amount for a task
// not yet created counts toward the pool, as only a malformed log has one).
func (s *State) RootSpent(runID string) int64 {
	if r := s.run(runID); r != nil {
		return r.rootSpent
	}
	return 0
}

// countRootSpend adds tokens spent by task taskID to the run pool's spend
// when the task is not a shadow task.
func (r *runState) countRootSpend(taskID string, tokens int64) {
	if t := r.tasks[taskID]; t == nil || !t.Shadow() {
		r.rootSpent = events.AddSpend(r.rootSpent, tokens)
	}
}

// IsShadow reports whether task taskID of run runID exists and is a
// delegation's shadow task (Task.Shadow), without copying the task.
func (s *State) IsShadow(runID, taskID string) bool {
	r := s.run(runID)
	if r == nil || r.tasks[taskID] == nil {
		return false
	}
	return r.tasks[taskID].Shadow()
}

// Account returns the ledger account of task taskID in run runID; ok is
// false when the task never had a metered delegation (no allocation).
func (s *State) Account(runID, taskID string) (Account, bool) {
	r := s.run(runID)
	if r == nil || r.accounts[taskID] == nil {
		return Account{}, false
	}
	return *r.accounts[taskID].clone(), true
}

// Ledger returns the accounts of run runID in the order they were opened.
func (s *State) Ledger(runID string) []Account {
	p, _ := s.LedgerPage(runID, PageFilter{})
	return p.Items
}

// LedgerTotals returns the tokens granted and spent over every account of
// run runID (saturating), read in place: the metrics scrape reads it per run
// under the engine's read lock, where a copy of every account's history
// would cost the run.
func (s *State) LedgerTotals(runID string) (granted, spent int64) {
	r := s.run(runID)
	if r == nil {
		return 0, 0
	}
	for _, id := range r.accountOrder {
		a := r.accounts[id]
		granted, spent = SaturatingAdd(granted, a.TokensGranted), SaturatingAdd(spent, a.TokensSpent)
	}
	return granted, spent
}

// Allocation returns task taskID's allocation (grant and spend) in O(1),
// without copying the account's history: the admission check runs it on
// every delegate.request. ok is false when the task has no account.
func (s *State) Allocation(runID, taskID string) (Allocation, bool) {
	r := s.run(runID)
	if r == nil || r.accounts[taskID] == nil {
		return Allocation{}, false
	}
	a := r.accounts[taskID]
	return Allocation{TokensGranted: a.TokensGranted, TokensSpent: a.TokensSpent}, true
}
