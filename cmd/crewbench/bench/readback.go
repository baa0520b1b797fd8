package bench

import (
	"fmt"
	"slices"
	"strings"

	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/events"
)

// Final is what a run's persisted events say after a workload, read back
// from the store in the run's order.
type Final struct {
	Admitted int            // delegate.admitted events
	Spent    int64          // tokens of budget.reserved events
	Events   map[string]int // workload events by type
	Rejected map[string]int // delegate.rejected by reason
	// Bad lists payloads whose content is not what the workload wrote (the
	// first few): a store must keep every byte of every payload.
	Bad []string
	// Split counts decisions and settlements whose events are not next to
	// each other in the run's order: events committed together are.
	Split int
	// Unmatched counts admissions, settlements and messages whose
	// delegation's other events are missing or out of order, and
	// admissions of a delegation admitted before.
	Unmatched int
	// MaxInFlight is the most delegations in flight at once, replaying the
	// run's events in order.
	MaxInFlight int
}

// maxBad bounds Final.Bad.
const maxBad = 3

// finals folds read-back events into a Final per run.
type finals struct {
	runs   map[string]*Final
	replay map[string]*replay
}

// replay is the read-back state of one run between events.
type replay struct {
	last     string            // the previous event's type
	lastSub  string            // and its delegation
	inFlight map[string]string // admitted, not settled: subId → the mailbox message id once delivered
	// admitted holds every delegation admitted so far, settled or not: an
	// admission of one already settled is a duplicate too, which inFlight
	// alone no longer shows (and a store that wrote one operation twice and
	// lost another would read back the right count).
	admitted map[string]bool
}

func newFinals() *finals { return &finals{runs: map[string]*Final{}, replay: map[string]*replay{}} }

// result is the read-back, per run.
func (f *finals) result() map[string]Final {
	out := make(map[string]Final, len(f.runs))
	for run, x := range f.runs {
		out[run] = *x
	}
	return out
}

// addRecord folds a read-back record (msgpack payload) into f.
func (f *finals) addRecord(r decodedRecord) error {
	p, err := events.DecodePayload(r.Type, events.SchemaVersion(r.Type), r.Payload)
	if err != nil {
		return fmt.Errorf("bench: %s payload of run %s: %w", r.Type, r.Stream, err)
	}
	f.add(r.Stream, r.Type, p)
	return nil
}

// add folds one event of run, its payload decoded, into f.
func (f *finals) add(run, typ string, p any) {
	if !slices.Contains(workloadTypes, typ) {
		return
	}
	r, ok := f.runs[run]
	if !ok {
		r = &Final{Events: map[string]int{}, Rejected: map[string]int{}}
		f.runs[run], f.replay[run] = r, &replay{inFlight: map[string]string{}, admitted: map[string]bool{}}
	}
	rp := f.replay[run]
	r.Events[typ]++
	sub, bad := checkPayload(typ, p)
	if bad != "" && len(r.Bad) < maxBad {
		r.Bad = append(r.Bad, fmt.Sprintf("%s %s: %s", typ, sub, bad))
	}
	// follows tells whether this event sits right after the one it was
	// committed with.
	follows := func(prev string) bool { return rp.last == prev && rp.lastSub == sub }
	switch typ {
	case events.TypeDelegateAdmitted:
		r.Admitted++
		if !follows(events.TypeDelegateRequested) {
			r.Split++
		}
		if rp.admitted[sub] {
			r.Unmatched++
		}
		rp.admitted[sub], rp.inFlight[sub] = true, ""
		r.MaxInFlight = max(r.MaxInFlight, len(rp.inFlight))
	case events.TypeBudgetReserved:
		r.Spent += p.(*events.BudgetReserved).Tokens
		if !follows(events.TypeDelegateAdmitted) {
			r.Split++
		}
	case events.TypeDelegateRejected:
		r.Rejected[p.(*events.DelegateRejected).Reason]++
		if !follows(events.TypeDelegateRequested) {
			r.Split++
		}
	case events.TypeMailboxAppended:
		m := p.(*events.MailboxAppended)
		if id, ok := rp.inFlight[sub]; !ok || id != "" {
			r.Unmatched++
		} else {
			rp.inFlight[sub] = m.ID
		}
	case events.TypeDelegateCompleted, events.TypeDelegateFailed, events.TypeDelegateTimedOut,
		events.TypeDelegateCancelled:
		if !follows(events.TypeMailboxAppended) {
			r.Split++
		}
		if id, ok := rp.inFlight[sub]; !ok || id == "" || id != settledOf(p).MessageID {
			r.Unmatched++
		}
		delete(rp.inFlight, sub)
	}
	rp.last, rp.lastSub = typ, sub
}

// settledOf is the terminal payload of a settlement, empty for any other
// payload.
func settledOf(p any) *events.DelegateSettled {
	if s := audit.SettledPayload(p); s != nil {
		return s
	}
	return &events.DelegateSettled{}
}

// checkPayload returns the delegation an event is about and what is wrong
// with its content ("" when nothing): every field the workload sets must
// read back as written, so a store that truncates or drops bytes fails.
func checkPayload(typ string, p any) (sub, bad string) {
	var wrong []string
	want := func(ok bool, what string) {
		if !ok {
			wrong = append(wrong, what)
		}
	}
	// The parent task: the socket store's clients are worker tasks of
	// their own, parentTask_NN.
	parent := func(task string) bool { return strings.HasPrefix(task, parentTask) }
	switch v := p.(type) {
	case *events.DelegateRequested:
		sub = v.SubID
		want(parent(v.TaskID) && v.Role == "explorer", "task or role")
	case *events.DelegateAdmitted:
		sub = v.SubID
		want(parent(v.TaskID) && v.Role == "explorer" && v.ChildDepth == 2, "task, role or depth")
		want(v.Prompt == delegatePrompt && v.Description == delegateDesc, "prompt or description")
		want(v.ReservedTokens > 0, "reserved tokens")
		// NB: the spawn fields and the policy are most of the admission's
		// bytes; a store that dropped them would be timed writing less.
		want(v.Model != "" && v.Title != "" && v.Cwd != "" && v.ParentRole != "" && v.TimeoutSec > 0 &&
			v.Deadline > 0, "model, title, cwd, parent role or deadline")
		want(policyKept(v.Policy), "policy")
	case *events.BudgetReserved:
		sub = v.SubID
		want(parent(v.TaskID) && v.Tokens > 0 && v.GrantedTokens > 0, "task or tokens")
	case *events.DelegateRejected:
		sub = v.SubID
		want(v.Reason == ReasonSlots || v.Reason == ReasonBudget, "reason")
		// NB: a rejection's policy holds only what the decision reached
		// before it refused (crewlog's stops at the first rule broken).
		want(v.Message != "" && v.Policy != nil && v.Policy.Capacity > 0, "message or policy")
	case *events.MailboxAppended:
		if v.Data != nil {
			sub = v.Data.SubID
		}
		want(parent(v.To) && v.From == events.ResultSenderPrefix+sub && v.Kind == events.KindResponse &&
			v.Priority != "" && v.DeliveryMode != "" && v.ID != "", "addressing")
		want(v.Data != nil && v.Body == fencedResult(sub, outcomeOf(v.Data)), "body")
	default:
		s := settledOf(p)
		sub = s.SubID
		want(parent(s.TaskID) && s.MessageID != "", "task or message id")
		want(s.OK == (typ == events.TypeDelegateCompleted), "ok flag")
	}
	if sub == "" {
		wrong = append(wrong, "no delegation id")
	}
	return sub, strings.Join(wrong, ", ")
}

// policyKept tells whether a decision's policy read back with what every
// implementation records there: the slots, the grant and the request.
func policyKept(p *events.Policy) bool {
	return p != nil && p.Capacity > 0 && p.Granted > 0 && p.Requested > 0 && p.MaxDepth > 0 && p.TimeoutSec > 0
}

// outcomeOf a result message's flags.
func outcomeOf(d *events.MessageData) string {
	switch {
	case d.Cancelled:
		return "cancelled"
	case d.TimedOut:
		return "timed_out"
	case d.OK:
		return "ok"
	}
	return "failed"
}
