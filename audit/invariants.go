package audit

import (
	"fmt"
	"strings"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// Names of the domain invariants Check verifies.
const (
	InvariantSpent     = "tokens-spent"   // tokensSpent = Σ reservations + Σ charges
	InvariantGranted   = "tokens-granted" // tokensGranted is written once
	InvariantSlots     = "slots-held"     // held slots = in-flight delegations
	InvariantTerminal  = "one-terminal"   // a delegation ends exactly once
	InvariantAdmission = "admitted-once"  // a delegation is admitted once
	// InvariantReservation: a reservation is at most what remained of the
	// parent's grant when it was admitted (and, in nested budget mode, of
	// the run pool; a shadow's grant is its own reservation).
	InvariantReservation = "reservation-within-grant"
	maxProblems          = 100                 // past this, Check stops collecting
	problemsTruncated    = "too many problems" // Detail of the last Problem when capped
)

// Problem is one broken invariant, at the first position where it shows.
type Problem struct {
	Position  uint64 `json:"position"`
	Run       string `json:"run"`
	Subject   string `json:"subject"`
	Invariant string `json:"invariant"`
	Detail    string `json:"detail"`
}

func (p Problem) String() string {
	return fmt.Sprintf("position %d: %s: %s %s: %s", p.Position, p.Invariant, p.Run, p.Subject, p.Detail)
}

// CheckOptions tune Check; nil means defaults.
type CheckOptions struct {
	// Progress, when set, is called now and then with the events checked
	// and the durable head.
	Progress func(done, total uint64)
}

// CheckReport is what Check found.
type CheckReport struct {
	Events   uint64    `json:"events"`
	Problems []Problem `json:"problems"`
}

// Check folds the whole log and verifies the domain invariants the fold is
// built to keep, each against an independent count of the raw events:
//
//   - per task, tokensSpent = Σ reservations + Σ charges of its events;
//   - tokensGranted never changes once the account is open;
//   - held slots = delegations admitted and not terminal;
//   - every delegation is admitted once, and a terminal delegation has
//     exactly one terminal event (none for one never admitted);
//   - a reservation is never above what remained of the grant at its
//     admission (granted − spent, from the checker's own sums), nor, in
//     nested budget mode, above the run pool (workflow tasks) or seeded
//     with anything but the shadow's own reservation.
//
// Problems are listed in log order, the first bad position first (at most
// 100). An error means the log could not be read (it wraps
// eventlog.ErrCorrupt for damaged records).
func Check(l *eventlog.Log, o *CheckOptions) (CheckReport, error) {
	head, _ := l.Head()
	c := newChecker()
	it := l.Read(1)
	defer it.Close()
	for it.Next() && !c.full() {
		if err := c.visit(it.Event()); err != nil {
			return CheckReport{Events: c.events}, fmt.Errorf("audit: check: %w", err)
		}
		if o != nil && o.Progress != nil && c.events%progressEvery == 0 {
			o.Progress(c.events, head)
		}
	}
	if err := it.Close(); err != nil {
		return CheckReport{Events: c.events}, fmt.Errorf("audit: check: %w", err)
	}
	if o != nil && o.Progress != nil {
		o.Progress(c.events, c.events)
	}
	return c.report(), nil
}

// key names a task or a delegation within its run.
type key struct{ run, id string }

// delegation is what the checker counts of one delegation.
type delegation struct {
	admitted  bool
	inFlight  bool
	terminals int
}

// account is what the checker counts of one parent task's ledger.
type account struct {
	spent   int64 // Σ reserved + charged, from the events
	granted int64 // tokensGranted when the account opened
	opened  bool
}

// checker folds events and checks each against its own counts. One map per
// subject (delegation, account) rather than one per count keeps it at a
// lookup and a store per event, and nothing it does per event allocates
// (maps grow, amortised), so the check costs little next to the fold.
type checker struct {
	s           *projections.State
	dec         *events.Decoder
	runs        map[string]string // stream → one copy of the run id, for the keys
	delegations map[key]delegation
	accounts    map[key]account
	inFlight    int
	events      uint64
	problems    []Problem
}

func newChecker() *checker {
	return &checker{
		s: projections.New(), dec: events.NewDecoder(), runs: map[string]string{},
		delegations: map[key]delegation{}, accounts: map[key]account{},
	}
}

// full reports whether Check has stopped collecting (maxProblems).
func (c *checker) full() bool { return len(c.problems) >= maxProblems }

// visit decodes and checks one record; an error is a payload that does not
// decode (it wraps eventlog.ErrCorrupt). Once full it ignores the rest.
func (c *checker) visit(r *eventlog.Event) error {
	if c.full() {
		return nil
	}
	ev, err := projections.FromLogWith(c.dec, r)
	if err != nil {
		return err
	}
	c.check(ev)
	return nil
}

// check checks one decoded event. Once full it ignores the rest.
func (c *checker) check(ev events.Event) {
	if c.full() {
		return
	}
	c.events++
	c.step(ev)
	if c.full() {
		c.problems = append(c.problems[:maxProblems-1],
			Problem{Position: ev.Position, Invariant: "-", Detail: problemsTruncated})
	}
}

// report finishes the check (the end-state invariants, unless the
// problems were capped) and returns what it found.
func (c *checker) report() CheckReport {
	if !c.full() {
		c.finish()
	}
	return CheckReport{Events: c.events, Problems: c.problems}
}

func (c *checker) fail(ev events.Event, k key, inv, format string, args ...any) {
	c.problems = append(c.problems, Problem{
		Position: ev.Position, Run: k.run, Subject: k.id, Invariant: inv, Detail: fmt.Sprintf(format, args...),
	})
}

// run returns the checker's copy of a stream name. NB: a record's strings
// share one buffer with the whole record, so a key holding ev.Stream would
// keep a record alive per delegation.
func (c *checker) run(stream string) string {
	if r, ok := c.runs[stream]; ok {
		return r
	}
	r := strings.Clone(stream)
	c.runs[r] = r
	return r
}

func (c *checker) step(ev events.Event) {
	if p, ok := ev.Payload.(*events.BudgetReserved); ok {
		c.reservation(ev, p) // against the state before it
	}
	projections.Apply(c.s, ev)
	switch p := ev.Payload.(type) {
	case *events.BudgetReserved:
		c.ledger(ev, key{c.run(ev.Stream), p.TaskID}, p.Tokens)
	case *events.BudgetCharged:
		c.ledger(ev, key{c.run(ev.Stream), p.TaskID}, p.Tokens)
	case *events.DelegateAdmitted:
		k := key{c.run(ev.Stream), p.SubID}
		d := c.delegations[k]
		if d.admitted {
			c.fail(ev, k, InvariantAdmission, "admitted a second time")
		}
		if !d.inFlight {
			c.inFlight++
		}
		d.admitted, d.inFlight = true, true
		c.delegations[k] = d
		c.slots(ev, k)
	default:
		if t := SettledPayload(ev.Payload); t != nil {
			k := key{c.run(ev.Stream), t.SubID}
			d := c.delegations[k]
			d.terminals++
			switch {
			case !d.admitted:
				c.fail(ev, k, InvariantTerminal, "%s for a delegation never admitted", ev.Type)
			case d.terminals > 1:
				c.fail(ev, k, InvariantTerminal, "%s is terminal event number %d", ev.Type, d.terminals)
			}
			if d.inFlight {
				c.inFlight--
			}
			d.inFlight = false
			c.delegations[k] = d
			c.slots(ev, k)
		}
	}
}

// reservation checks a reservation against what remained of its parent's
// grant just before it: the checker's own sums once the account is open,
// else the grant the reservation seeds.
func (c *checker) reservation(ev events.Event, p *events.BudgetReserved) {
	k := key{c.run(ev.Stream), p.TaskID}
	acc := c.accounts[k]
	granted, spent := p.GrantedTokens, int64(0)
	if acc.opened {
		granted, spent = acc.granted, acc.spent
	}
	if p.Tokens < 0 || p.Tokens > granted-spent {
		c.fail(ev, k, InvariantReservation, "reserved %d with %d remaining (%d granted - %d spent)", p.Tokens,
			granted-spent, granted, spent)
		return
	}
	if c.s.Config().BudgetMode != events.BudgetModeNested {
		return
	}
	task, _ := c.s.Task(k.run, k.id)
	if task.Shadow() {
		if d, _ := c.s.Delegation(k.run, k.id); !acc.opened && p.GrantedTokens != d.Reserved {
			c.fail(ev, k, InvariantReservation, "nested budget mode: shadow seeded with %d, its own reservation was %d",
				p.GrantedTokens, d.Reserved)
		}
		return
	}
	run, _ := c.s.Run(k.run)
	if total, ok := run.Budget(); ok {
		if pool := total - c.s.RootSpent(k.run); p.Tokens > pool {
			c.fail(ev, k, InvariantReservation,
				"nested budget mode: reserved %d with %d left in the run pool (%d budgetTotal)", p.Tokens, pool, total)
		}
	}
}

// ledger checks the account of k after a reservation or charge of tokens.
func (c *checker) ledger(ev events.Event, k key, tokens int64) {
	acc := c.accounts[k]
	acc.spent = projections.SaturatingAdd(acc.spent, tokens)
	c.checkAccount(ev, k, &acc)
	c.accounts[k] = acc
}

func (c *checker) checkAccount(ev events.Event, k key, acc *account) {
	a, ok := c.s.Allocation(k.run, k.id)
	if !ok {
		c.fail(ev, k, InvariantSpent, "no account after a %s", ev.Type)
		return
	}
	if a.TokensSpent != acc.spent {
		c.fail(ev, k, InvariantSpent, "tokensSpent %d != %d = Σ reservations + Σ charges", a.TokensSpent, acc.spent)
	}
	switch {
	case !acc.opened:
		acc.granted, acc.opened = a.TokensGranted, true
	case acc.granted != a.TokensGranted:
		c.fail(ev, k, InvariantGranted, "tokensGranted changed from %d to %d", acc.granted, a.TokensGranted)
		acc.granted = a.TokensGranted
	}
}

// slots checks the pool after a delegation took or freed a slot.
func (c *checker) slots(ev events.Event, k key) {
	if held := c.s.SlotsHeld(); held != c.inFlight {
		c.fail(ev, k, InvariantSlots, "%d slots held, %d delegations in flight", held, c.inFlight)
	}
}

// finish checks what only the end state can show: every account's spend
// and grant, and every terminal delegation's single terminal event.
func (c *checker) finish() {
	end := events.Event{Position: c.s.Position}
	page, _ := c.s.Runs(projections.RunFilter{})
	for _, r := range page.Runs {
		for _, a := range c.s.Ledger(r.RunID) {
			k := key{r.RunID, a.TaskID}
			acc := c.accounts[k]
			if a.TokensSpent != acc.spent {
				c.fail(end, k, InvariantSpent, "at the head tokensSpent %d != %d = Σ reservations + Σ charges",
					a.TokensSpent, acc.spent)
			}
			if acc.opened && acc.granted != a.TokensGranted {
				c.fail(end, k, InvariantGranted, "at the head tokensGranted is %d, opened with %d", a.TokensGranted, acc.granted)
			}
		}
		for _, d := range c.s.Delegations(r.RunID) {
			k := key{r.RunID, d.SubID}
			if n := c.delegations[k].terminals; d.Status.Terminal() && n != 1 {
				c.fail(end, k, InvariantTerminal, "status %s with %d terminal events", d.Status, n)
			}
		}
	}
}
