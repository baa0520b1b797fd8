package audit

import (
	"time"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// Decision is one recorded decision re-run by today's code.
//
// Replay --explain rebuilds the command from the events it recorded (a
// DelegateRequest from delegate.requested and the admitted/rejected payload,
// a DelegateSettle or DelegateExpire from the settlement, a Configure from
// engine.configured) and calls commands.Decide on the state just before the
// decision, with the config then in force, the recorded time as the clock
// and the recorded ids as the id source. The events it decides are compared
// with the recorded ones; any difference is policy drift.
type Decision struct {
	Position uint64    `json:"position"` // first event of the decision
	Last     uint64    `json:"last"`     // last event of the decision
	Time     time.Time `json:"time"`
	Run      string    `json:"run"`
	Actor    string    `json:"actor"`
	// Command is what was decided: delegate.request, delegate.settle,
	// delegate.expire, ask.expire, engine.configure, a job's command, the
	// command a quota refused, a wait method a policy switch refused, a
	// task.usage that crossed a threshold of its run's budget, or a
	// credential.revoke that closed the question its task was parked on.
	Command string `json:"command"`
	// Subject is the delegation (subId) or, for a request rejected before
	// a subId existed, the parent task.
	Subject string `json:"subject,omitempty"`
	// Recorded and Today are the outcomes, as the log holds it and as
	// today's code decides it. An imported decision (its events carry an
	// events.ImportCorrelation correlation id) was taken by the system
	// that recorded it, under its own config: it is not decided again,
	// Today says so and names that system, and it is never drift.
	Recorded string `json:"recorded"`
	Today    string `json:"today"`
	// Rule is the rule that decided it today, with its inputs (of an
	// imported decision, the rule its record names).
	Rule string `json:"rule"`
	// Drift is set when today's events differ from the recorded ones;
	// Differences lists where (paths into the decision's event list).
	Drift       bool         `json:"drift"`
	Differences []Difference `json:"differences,omitempty"`
}

// explainer buffers the events of one decision, so it can be re-run on the
// state before it (which is simply the state not yet fed the buffer: no
// clone per decision), then folds them.
type explainer struct {
	run string
	res *Result
	// hand, when set, receives each decision in place of res.Decisions.
	hand  func(Decision)
	group []events.Event
}

// add takes the next event, closing the decision in progress when ev does
// not belong to it.
func (x *explainer) add(ev events.Event) {
	if len(x.group) > 0 && !sameDecision(x.group[0], x.group[len(x.group)-1], ev) {
		x.flush()
	}
	x.group = append(x.group, ev)
}

// flush explains the buffered decision (when it is one audit re-runs) and
// folds its events.
func (x *explainer) flush() {
	if len(x.group) == 0 {
		return
	}
	s := x.res.State
	if selected(x.run, x.group[0].Stream) {
		switch d, ok := explainGroup(s, x.group); {
		case !ok:
		case x.hand != nil:
			if d.Drift {
				x.res.handedDrift++
			}
			x.hand(d)
		default:
			x.res.Decisions = append(x.res.Decisions, d)
		}
	}
	for _, ev := range x.group {
		projections.Apply(s, ev)
	}
	clear(x.group)
	x.group = x.group[:0]
}

// sameDecision reports whether ev was decided together with the events
// first..last: a command's events share its command id (ids are unique in
// the log); events without one share the clock reading and the stream. A
// request or a config change always starts a decision of its own.
func sameDecision(first, last, ev events.Event) bool {
	if ev.CommandID != first.CommandID || ev.Stream != first.Stream || ev.Time != first.Time {
		return false
	}
	if ev.CommandID != "" {
		return true
	}
	if isJobFamily(ev.Type) {
		return !jobDecisionStarts(last, ev)
	}
	switch ev.Type {
	case events.TypeDelegateRequested, events.TypeEngineConfigured, events.TypeRunQuotaExceeded:
		return false
	case events.TypeDelegateRejected:
		return last.Type == events.TypeDelegateRequested
	}
	return true
}
