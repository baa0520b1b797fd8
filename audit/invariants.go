package audit

import (
	"fmt"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// Names of the domain invariants Check verifies.
const (
	InvariantSpent     = "tokens-spent"      // tokensSpent = Σ reservations + Σ charges
	InvariantGranted   = "tokens-granted"    // tokensGranted is written once
	InvariantSlots     = "slots-held"        // held slots = in-flight delegations
	InvariantTerminal  = "one-terminal"      // a delegation ends exactly once
	InvariantAdmission = "admitted-once"     // a delegation is admitted once
	maxProblems        = 100                 // past this, Check stops collecting
	problemsTruncated  = "too many problems" // Detail of the last Problem when capped
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
//     exactly one terminal event (none for one never admitted).
//
// Problems are listed in log order, the first bad position first (at most
// 100). An error means the log could not be read (it wraps
// eventlog.ErrCorrupt for damaged records).
func Check(l *eventlog.Log, o *CheckOptions) (CheckReport, error) {
	var rep CheckReport
	head, _ := l.Head()
	c := checker{
		s: projections.New(), spent: map[key]int64{}, granted: map[key]int64{},
		inFlight: map[key]bool{}, admitted: map[key]bool{}, terminals: map[key]int{},
	}
	it := l.Read(1)
	defer it.Close()
	for it.Next() {
		ev, err := projections.FromLog(it.Event())
		if err != nil {
			return rep, fmt.Errorf("audit: check: %w", err)
		}
		c.step(ev)
		if rep.Events++; o != nil && o.Progress != nil && rep.Events%progressEvery == 0 {
			o.Progress(rep.Events, head)
		}
		if len(c.problems) >= maxProblems {
			c.problems = append(c.problems[:maxProblems-1], Problem{Position: ev.Position, Invariant: "-", Detail: problemsTruncated})
			break
		}
	}
	if err := it.Close(); err != nil {
		return rep, fmt.Errorf("audit: check: %w", err)
	}
	if len(c.problems) < maxProblems {
		c.finish()
	}
	if o != nil && o.Progress != nil {
		o.Progress(rep.Events, rep.Events)
	}
	rep.Problems = c.problems
	return rep, nil
}

// key names a task or a delegation within its run.
type key struct{ run, id string }

type checker struct {
	s         *projections.State
	spent     map[key]int64 // Σ reserved + charged per parent task, from the events
	granted   map[key]int64 // tokensGranted when the account opened
	inFlight  map[key]bool
	admitted  map[key]bool
	terminals map[key]int
	problems  []Problem
}

func (c *checker) fail(ev events.Event, k key, inv, format string, args ...any) {
	c.problems = append(c.problems, Problem{
		Position: ev.Position, Run: k.run, Subject: k.id, Invariant: inv, Detail: fmt.Sprintf(format, args...),
	})
}

func (c *checker) step(ev events.Event) {
	projections.Apply(c.s, ev)
	switch p := ev.Payload.(type) {
	case *events.BudgetReserved:
		c.ledger(ev, key{ev.Stream, p.TaskID}, p.Tokens)
	case *events.BudgetCharged:
		c.ledger(ev, key{ev.Stream, p.TaskID}, p.Tokens)
	case *events.DelegateAdmitted:
		k := key{ev.Stream, p.SubID}
		if c.admitted[k] {
			c.fail(ev, k, InvariantAdmission, "admitted a second time")
		}
		c.admitted[k], c.inFlight[k] = true, true
		c.slots(ev, k)
	default:
		if t := settledOf(ev); t != nil {
			k := key{ev.Stream, t.SubID}
			c.terminals[k]++
			switch {
			case !c.admitted[k]:
				c.fail(ev, k, InvariantTerminal, "%s for a delegation never admitted", ev.Type)
			case c.terminals[k] > 1:
				c.fail(ev, k, InvariantTerminal, "%s is terminal event number %d", ev.Type, c.terminals[k])
			}
			delete(c.inFlight, k)
			c.slots(ev, k)
		}
	}
}

// ledger checks the account of k after a reservation or charge of tokens.
func (c *checker) ledger(ev events.Event, k key, tokens int64) {
	c.spent[k] += tokens
	a, ok := c.s.Allocation(k.run, k.id)
	if !ok {
		c.fail(ev, k, InvariantSpent, "no account after a %s", ev.Type)
		return
	}
	if a.TokensSpent != c.spent[k] {
		c.fail(ev, k, InvariantSpent, "tokensSpent %d != %d = Σ reservations + Σ charges", a.TokensSpent, c.spent[k])
	}
	g, seen := c.granted[k]
	switch {
	case !seen:
		c.granted[k] = a.TokensGranted
	case g != a.TokensGranted:
		c.fail(ev, k, InvariantGranted, "tokensGranted changed from %d to %d", g, a.TokensGranted)
		c.granted[k] = a.TokensGranted
	}
}

// slots checks the pool after a delegation took or freed a slot.
func (c *checker) slots(ev events.Event, k key) {
	if held := c.s.SlotsHeld(); held != len(c.inFlight) {
		c.fail(ev, k, InvariantSlots, "%d slots held, %d delegations in flight", held, len(c.inFlight))
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
			if a.TokensSpent != c.spent[k] {
				c.fail(end, k, InvariantSpent, "at the head tokensSpent %d != %d = Σ reservations + Σ charges", a.TokensSpent, c.spent[k])
			}
			if g, ok := c.granted[k]; ok && g != a.TokensGranted {
				c.fail(end, k, InvariantGranted, "at the head tokensGranted is %d, opened with %d", a.TokensGranted, g)
			}
		}
		for _, d := range c.s.Delegations(r.RunID) {
			k := key{r.RunID, d.SubID}
			if d.Status.Terminal() && c.terminals[k] != 1 {
				c.fail(end, k, InvariantTerminal, "status %s with %d terminal events", d.Status, c.terminals[k])
			}
		}
	}
}
