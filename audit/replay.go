package audit

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// Errors of Replay for a stop position it cannot honour.
var (
	// ErrPastHead: ReplayOptions.To is past the durable head.
	ErrPastHead = errors.New("audit: replay: position past the head")
	// ErrInsideDecision: ReplayOptions.To falls between two events one
	// decision wrote together, and the decisions are explained.
	ErrInsideDecision = errors.New("audit: replay: position inside a decision")
)

// Entry is one line of a timeline: where, when, who, what, and what it
// meant.
type Entry struct {
	Position uint64    `json:"position"`
	Time     time.Time `json:"time"`
	Run      string    `json:"run"`
	Actor    string    `json:"actor"`
	Type     string    `json:"type"`
	Meaning  string    `json:"meaning"`
}

// ReplayOptions choose what Replay rebuilds and reports. The zero value
// rebuilds the whole log and reports nothing but the state.
type ReplayOptions struct {
	// Run restricts the timeline and the explained decisions to one run
	// (engine.configured events are kept: they change every run's policy).
	// The state is always the whole store's: admission depends on slots
	// held by other runs.
	Run string
	// To is the last position to fold (0 = the durable head): not past the
	// head (ErrPastHead) and, with Explain, not inside a decision
	// (ErrInsideDecision).
	To uint64
	// At, when not nil, stops before the first event, in log order, whose
	// time is later than *At (and at To, when that is earlier), where
	// PositionAt stops: times need not follow positions (an import records
	// its source's). Nothing is folded when the first event is later. The
	// fold finds that event itself, so the events before it are read once.
	// Any time is one: the zero time is before every event.
	At *time.Time
	// Explain re-runs every recorded decision (see Explain).
	Explain bool
	// Timeline, when set, receives every event of the selection in order.
	Timeline func(Entry)
	// Decision, when set, receives every explained decision (with
	// Explain) in log order in place of Result.Decisions, which then stays
	// empty: a replay of millions of decisions holds none of them.
	Decision func(Decision)
	// Progress, when set, is called now and then with the events folded
	// and the number to fold at most: To, else the head, though At may stop
	// the fold sooner (where, the fold learns only there). The last call
	// gives the events folded as both.
	Progress func(done, total uint64)
	// From, when set, is a state already folded up to its Position (an
	// earlier Replay's, say): Replay folds the events after it into it
	// instead of starting from position 1. It is modified: pass a clone
	// of a state you keep. The result is the same as a replay from 1.
	From *projections.State
}

// Result is what Replay rebuilt.
type Result struct {
	State *projections.State
	// Head is the durable head of the log; State.Position is where the
	// replay stopped.
	Head uint64
	// Decisions are the explained decisions (with Explain), in log order,
	// unless ReplayOptions.Decision received them.
	Decisions []Decision
	// handedDrift counts the decisions handed to ReplayOptions.Decision
	// that today's code takes differently.
	handedDrift int
}

// Drift counts the decisions today's code takes differently, those handed
// to ReplayOptions.Decision included.
func (r *Result) Drift() int {
	n := r.handedDrift
	for _, d := range r.Decisions {
		if d.Drift {
			n++
		}
	}
	return n
}

// progressEvery is how many events pass between two Progress calls: often
// enough for a smooth bar, rare enough to cost nothing.
const progressEvery = 1 << 14

// Replay folds the log from position 1 into a fresh state up to the chosen
// position or time, calling o.Timeline for each event of the selection and,
// with o.Explain, re-running each recorded decision against the state just
// before it. It never writes. Errors wrap eventlog.ErrCorrupt when a record,
// a payload or a table block of the store is damaged; a read that fails (an
// I/O error) is an error that does not wrap it.
func Replay(l *eventlog.Log, o ReplayOptions) (*Result, error) {
	head, _ := l.Head()
	res := &Result{State: projections.New(), Head: head}
	if o.From != nil {
		res.State = o.From
	}
	if o.To > 0 {
		if err := checkStop(l, head, o.To, o.Explain); err != nil {
			return nil, err
		}
	}
	total := head
	if o.To > 0 && o.To < total {
		total = o.To
	}
	latest := int64(math.MaxInt64)
	if o.At != nil {
		latest = nanos(*o.At)
	}
	ex := explainer{run: o.Run, res: res, hand: o.Decision}
	d := decode(l, res.State.Position+1, o.To, latest)
	defer d.stop()
	var done uint64
	for b := range d.out {
		for _, ev := range b.evs {
			if o.Timeline != nil && selected(o.Run, ev.Stream) {
				o.Timeline(entryOf(ev))
			}
			if o.Explain {
				ex.add(ev)
			} else {
				projections.Apply(res.State, ev)
			}
			if done++; o.Progress != nil && done%progressEvery == 0 {
				o.Progress(done, total)
			}
		}
		if b.err != nil {
			return nil, fmt.Errorf("audit: replay: %w", b.err)
		}
		d.recycle(b)
	}
	if o.Explain {
		ex.flush()
	}
	if o.Progress != nil {
		o.Progress(done, done)
	}
	return res, nil
}

// checkStop refuses a stop the log cannot answer for: past the head (the
// state there is not known yet, and the head's would be shown in its place)
// and, when decisions are explained, between two events one decision wrote
// together: the cut decision is re-run against its own recorded events but
// only part of them, and would be called drift (a delegation admitted with
// no budget reserved). A plain fold may stop anywhere, as RunAt does. The
// error names the decision's positions, so the operator can stop before or
// after it.
func checkStop(l *eventlog.Log, head, to uint64, explain bool) error {
	if to > head {
		return fmt.Errorf("%w: %d, the head is %d", ErrPastHead, to, head)
	}
	if !explain {
		return nil
	}
	first, last := to, to
	for first > 1 {
		// NB: a read that fails is no start of the decision: the refusal would name a part of it and send the
		// operator to stop inside it.
		inside, err := sameDecisionAt(l, first-1)
		if err != nil {
			return fmt.Errorf("audit: replay: %w", err)
		}
		if !inside {
			break
		}
		first--
	}
	for last < head {
		inside, err := sameDecisionAt(l, last)
		if err != nil {
			return fmt.Errorf("audit: replay: %w", err)
		}
		if !inside {
			break
		}
		last++
	}
	switch {
	case last == to:
	case first == 1:
		return fmt.Errorf("%w: %d is inside the decision at positions %d..%d; stop at %d", ErrInsideDecision,
			to, first, last, last)
	default:
		return fmt.Errorf("%w: %d is inside the decision at positions %d..%d; stop at %d or %d", ErrInsideDecision,
			to, first, last, first-1, last)
	}
	return nil
}

// sameDecisionAt reports whether the events at pos and pos+1 belong to one
// decision, as --explain groups them (sameDecision). NB: a decision of
// several events shares its first's command id, stream and clock reading,
// so the event at pos stands for the decision's first as well as its last.
// An event this build cannot decode (a newer build's, or a damaged one,
// which the fold then reports) is grouped by its command id alone.
func sameDecisionAt(l *eventlog.Log, pos uint64) (bool, error) {
	var (
		rs  [2]eventlog.Event
		evs [2]events.Event
	)
	decoded := true
	for i := range rs {
		var err error
		if rs[i], err = l.Event(pos + uint64(i)); err != nil {
			return false, err
		}
		if evs[i], err = projections.FromLog(&rs[i]); err != nil {
			decoded = false
		}
	}
	if !decoded {
		return rs[0].CommandID != "" && rs[0].CommandID == rs[1].CommandID, nil
	}
	return sameDecision(evs[0], evs[0], evs[1]), nil
}

// selected reports whether an event of stream belongs to the run
// selection.
func selected(run, stream string) bool {
	return run == "" || stream == run || stream == events.EngineStream
}

func entryOf(ev events.Event) Entry {
	return Entry{
		Position: ev.Position, Time: time.Unix(0, ev.Time).UTC(), Run: ev.Stream,
		Actor: ev.Actor.String(), Type: ev.Type, Meaning: Describe(ev),
	}
}
