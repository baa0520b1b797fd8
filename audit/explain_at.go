package audit

import (
	"context"
	"fmt"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// ExplainReach is how many events of its stream before a position ExplainAt
// reads first to find the whole decision holding it: a decision's events are
// one command's, most often a handful (decisionAt reads further back for a
// longer one).
const ExplainReach = 64

// ExplainAt explains the recorded decision holding position pos, as Replay
// with Explain does, at O(the decision's run) instead of O(the log): the
// decision is re-run on its run's state just before it, folded from the
// run's own stream and the engine stream (projections.RunAt).
//
// That state holds no other run, so the daemon-wide inputs of a delegation
// request — the slots held in all, the other runs waiting for one — are
// taken from the decision's record (events.Policy.Held and Waiting,
// projections.State.AssumePool), and Recorded is true. Today is then
// today's policy on the inputs the decision recorded: a recorded pool count
// that the other runs' events contradict is not found here, only by a full
// Replay with Explain, which folds every run. Nor is an admission the full
// fold ignores (of a subId another run's delegation held, which an import
// could record before crewd refused it): the run folded alone holds it, and
// its settlement is explained as one (see projections.RunAt).
//
// states, when not nil, lends run states folded before (the fold then
// starts from the nearest) and keeps the one ExplainAt folds.
//
// ok is false when the event at pos is not part of a decision audit
// explains (run and task transitions, messages, ...).
//
// ctx ends the fold of the run's state as it ends projections.RunAt: the
// error then wraps ctx.Err(), and states keeps nothing.
func ExplainAt(ctx context.Context, l *eventlog.Log, pos uint64, states RunStates) (
	d Decision, recorded, ok bool, err error) {
	group, searched, err := decisionAt(l, pos)
	if states != nil {
		states.Searched(searched)
	}
	if err != nil || group == nil {
		return Decision{}, false, false, err
	}
	first := group[0]
	var base *projections.State
	if states != nil {
		base = states.Base(first.Stream, first.Position-1)
	}
	s, _, err := projections.RunAtFrom(ctx, l, base, first.Stream, first.Position-1)
	if err != nil {
		return Decision{}, false, false, err
	}
	if states != nil {
		states.Keep(s)
		s = s.Clone() // the re-run below changes it
	}
	if p := policyOf(group); p != nil {
		s.AssumePool(p.Held, p.Waiting)
		recorded = true
	}
	d, ok = explainGroup(s, group)
	return d, recorded && ok, ok, nil
}

// RunStates lends ExplainAt run states (projections.RunAt's) folded
// before, and keeps the ones it folds. A state lent or kept is never
// modified.
type RunStates interface {
	// Base is the kept state of run with the greatest position ≤ to, or
	// nil.
	Base(run string, to uint64) *projections.State
	Keep(s *projections.State)
	// Searched is told the events ExplainAt read of the log to find the decision holding its position, before
	// any fold (a caller that charges a reader for what it has the log read counts them too).
	Searched(events int)
}

// maxExplainReach bounds how far back decisionAt reads: the longest decisions audit re-runs are a run's budget
// abort (an event per live task, at most commands.MaxLiveTasksPerRun, and per delegation in flight, at most the
// pool's commands.MaxMaxSlots) and a job's disconnect (an event per call in flight, at most
// commands.MaxProxyMaxInFlight, fewer), and a run's end, which times out the question of each task parked on one
// and resumes it (two events a task); three times their events leaves a margin for the few others such a decision
// writes (the abort itself, the run's end, a lease cleared). A longer command is no decision audit re-runs, and its
// events are not all read.
const maxExplainReach = 3 * (commands.MaxLiveTasksPerRun + commands.MaxMaxSlots)

// decisionAt returns the events of the decision holding pos, grouped as Replay groups them: the events of pos's
// stream read from ExplainReach before it, split where sameDecision splits them or where the positions are not
// consecutive (another stream's event between two of them closes a decision in the whole log too). A decision that
// reaches back to the first event read may begin before it (a job's disconnect writes an event per call in flight,
// a budget abort one per live task), so the read then goes back maxExplainReach, unless the decision begins after
// its first event or the stream's first event was read. nil when pos is past the head. read is the events it read,
// the one at pos included.
func decisionAt(l *eventlog.Log, pos uint64) (group []events.Event, read int, err error) {
	rec, err := l.Event(pos)
	if err != nil {
		return nil, 0, err
	}
	read = 1
	// NB: the longest reach at once after a miss: a decision longer than ExplainReach is one of the few long ones,
	// and each read starts over.
	for reach := uint64(ExplainReach); ; reach = maxExplainReach {
		from := uint64(1) // a stream version
		if rec.StreamVersion > reach {
			from = rec.StreamVersion - reach
		}
		group, begun, n, err := readDecision(l, rec.Stream, from, pos)
		read += n
		if err != nil || begun || from == 1 || reach >= maxExplainReach {
			return group, read, err
		}
	}
}

// readDecision is decisionAt's read of stream from version from. begun
// reports that the decision begins after the first event read, so none of
// it lies before from; read is the events read.
func readDecision(l *eventlog.Log, stream string, from, pos uint64) (
	group []events.Event, begun bool, read int, err error) {
	it := l.ReadStream(stream, from)
	defer it.Close()
	var first uint64 // position of the first event read
	for it.Next() {
		read++
		e := it.Event()
		ev, err := projections.FromLog(e)
		if err != nil {
			return nil, false, read, err
		}
		if first == 0 {
			first = ev.Position
		}
		if n := len(group); n > 0 && (ev.Position != group[n-1].Position+1 || !sameDecision(group[0], group[n-1], ev)) {
			if group[n-1].Position >= pos {
				break
			}
			group = nil
		}
		group = append(group, ev)
	}
	if err := it.Close(); err != nil {
		return nil, false, read, fmt.Errorf("audit: explain position %d: %w", pos, err)
	}
	if len(group) == 0 || group[0].Position > pos {
		return nil, true, read, nil
	}
	return group, group[0].Position != first, read, nil
}

// policyOf is the policy inputs a request decision recorded, nil for
// other decisions.
func policyOf(group []events.Event) *events.Policy {
	for _, ev := range group {
		switch p := ev.Payload.(type) {
		case *events.DelegateRejected:
			return p.Policy
		case *events.DelegateAdmitted:
			return p.Policy
		}
	}
	return nil
}
