package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// Store is one implementation of the compared workload: a delegate admission
// (read the run's state, check slots and budget, append delegate.requested +
// delegate.admitted + budget.reserved atomically, or delegate.requested +
// delegate.rejected) and the settlement that frees the slot again
// (mailbox.appended + the terminal delegate event).
//
// Concurrency: Admit and Settle are called from many goroutines at once;
// Setup, Final and Close from one. Errors: a policy refusal is an answer
// (Admission.Reason), not an error; an error means the store failed.
type Store interface {
	// Setup creates the runs, each with one running parent task whose
	// budget is spec.Budget and a slot cap of spec.Slots per run.
	Setup(ctx context.Context, runs []string, spec Spec) error
	// Admit decides one delegate.request of budgetTokens for the run's
	// parent task, durably.
	Admit(ctx context.Context, run string, tokens int64) (Admission, error)
	// Settle ends the admitted delegation subID with outcome (ok, failed,
	// timed_out, cancelled), durably.
	Settle(ctx context.Context, run, subID, outcome string) error
	// Final reads back, from what the store persisted, the state per run.
	Final(ctx context.Context) (map[string]Final, error)
	Close() error
}

// Spec is the policy every implementation enforces identically.
type Spec struct {
	Budget int64 // the run's budgetTotal, granted to its parent task
	Slots  int   // in-flight delegations allowed per run
	// Clients is how many clients will work on each run at once (the
	// socket store opens that many connections per run).
	Clients int
	// OneParent makes every client of a run act for the run's one parent
	// task (the socket store otherwise gives each its own worker task), so
	// the pre-check's budget binds them all.
	OneParent bool
}

// Admission is the answer to one Admit.
type Admission struct {
	SubID  string // set when admitted
	Reason string // the rejection reason, "" when admitted
}

// Admitted tells whether the request was admitted.
func (a Admission) Admitted() bool { return a.Reason == "" }

// Rejection reasons the workload can produce (the same strings as crewlog's).
const (
	ReasonSlots  = "slots-exhausted"
	ReasonBudget = "budget-insufficient"
)

// Outcomes of a settlement, cycled by the check.
var outcomes = []string{"ok", "failed", "timed_out", "cancelled"}

// Parent task of every run: the workload's budget is its allocation.
const parentTask = "01_work"

// runState is what the alternatives keep per run: the read side of the
// decision. crewlog keeps the same in its projections.
type runState struct {
	Version  uint64   `msgpack:"v" json:"version"`
	Granted  int64    `msgpack:"g" json:"granted"`
	Spent    int64    `msgpack:"s" json:"spent"`
	Slots    int      `msgpack:"c" json:"slots"`
	InFlight []string `msgpack:"f" json:"inFlight"`
}

func (s *runState) clone() *runState {
	c := *s
	c.InFlight = slices.Clone(s.InFlight)
	return &c
}

// decide is the admission policy of the alternatives, in crewlog's order:
// slots first, then budget (SPEC §4.1 step 6). It returns the reason of a
// refusal or "".
func (s *runState) decide(tokens int64) string {
	if len(s.InFlight) >= s.Slots {
		return ReasonSlots
	}
	if tokens > s.Granted-s.Spent {
		return ReasonBudget
	}
	return ""
}

// admit applies an admission to the state.
func (s *runState) admit(subID string, tokens int64) {
	s.Spent += tokens
	s.InFlight = append(s.InFlight, subID)
}

// settle frees subID's slot; it refuses an unknown or settled delegation.
func (s *runState) settle(subID string) error {
	i := slices.Index(s.InFlight, subID)
	if i < 0 {
		return fmt.Errorf("bench: delegation %s is not in flight", subID)
	}
	s.InFlight = slices.Delete(s.InFlight, i, i+1)
	return nil
}

// errConflict is an optimistic-concurrency failure: re-read and retry.
var errConflict = errors.New("bench: version conflict")

// workloadTypes are the event types the workload writes; setup events are
// not compared.
var workloadTypes = []string{
	"delegate.requested", "delegate.admitted", "delegate.rejected", "budget.reserved",
	"mailbox.appended", "delegate.completed", "delegate.failed", "delegate.timed_out", "delegate.cancelled",
}
