package projections

import (
	"context"
	"fmt"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// RunAt folds run id alone as the full fold up to position to holds it: the
// run's stream merged, by position, with the engine stream, both read up to
// to, through the same Apply (the fold a cold run is read back with). It
// costs O(the run's events up to to + the engine stream's), not O(the log).
//
// The state's Position is to and its config the one in force at to. It
// holds no other run, so its daemon-wide records are the run's share of
// them only: the slot pool's holders are the run's own (SlotsHeld counts
// only them) and no other run waits for a slot. ok is false when the run
// has no event at or before to.
//
// NB: one history it folds otherwise than the full fold: a delegate.admitted of a subId whose slot another run's
// delegation held then, which the full fold ignores (heldByAnother) and a fold of this run alone, which does not
// read the other runs, takes, with its shadow task and settlement. crewd never records one (it mints subIds from
// UUIDs, and import.append refuses a held one); an import recorded before that refusal may hold one. No index of
// the log says which run held a subId at a position (its streams are runs), so knowing it costs a fold of the log
// up to there, which RunAt exists to avoid. A cold run re-folded from its stream (ColdStore) is read the same way.
//
// The fold looks at ctx before it starts and every 256 events of the run
// (foldCheckEvery): once ctx has ended it stops and returns no state and a
// *FoldStoppedError wrapping ctx.Err(), so errors.Is(err, context.Canceled)
// holds for a cancelled ctx, and its Read says how many of the run's events
// the fold had read.
func RunAt(ctx context.Context, l *eventlog.Log, id string, to uint64) (s *State, ok bool, err error) {
	return RunAtFrom(ctx, l, nil, id, to)
}

// FoldStoppedError is the error of a fold (RunAt, RunAtFrom) that stopped
// because its context ended: Err is the context's error, Read the events of
// the run the fold had read from the log by then (those after its base),
// for a caller that counts what it has the log read.
type FoldStoppedError struct {
	Run  string
	Read int
	Err  error
}

func (e *FoldStoppedError) Error() string {
	return fmt.Sprintf("projections: fold run %s: %v", e.Run, e.Err)
}

func (e *FoldStoppedError) Unwrap() error { return e.Err }

// foldCheckEvery is how many events of its run RunAt reads between two
// looks at its context: a fold stops within that many events of its
// context ending (a millisecond or two of folding), and the look is not paid
// per event.
const foldCheckEvery = 256

// RunAtFrom is RunAt continued from base, a state RunAt or RunAtFrom
// returned for the same run at a position ≤ to: it folds only the events
// after base.Position, into a clone (base is not modified). A nil base, or
// one past to, starts from the beginning. ctx ends it as it ends RunAt.
func RunAtFrom(ctx context.Context, l *eventlog.Log, base *State, id string, to uint64) (s *State, ok bool,
	err error) {
	if base != nil && base.Position > to {
		base = nil
	}
	s, err = foldRun(ctx, l, base, id, to)
	if err != nil {
		return nil, false, err
	}
	s.Position = to
	_, ok = s.runs[id]
	return s, ok, nil
}

// foldRun folds run id and the engine stream up to position upTo into a
// fresh state, or into a clone of base (a state of run id alone at
// base.Position ≤ upTo) with the events after base.Position. It stops,
// with a *FoldStoppedError and no state, once ctx has ended: it looks before
// it starts and every foldCheckEvery events of the run.
func foldRun(ctx context.Context, l *eventlog.Log, base *State, id string, upTo uint64) (*State, error) {
	if err := ctx.Err(); err != nil {
		return nil, &FoldStoppedError{Run: id, Err: err}
	}
	scratch, after, from := New(), uint64(0), uint64(1) // from: the first stream version to read
	if base != nil {
		scratch, after = base.Clone(), base.Position
		if r := base.runs[id]; r != nil {
			e, err := l.Event(r.last)
			if err != nil {
				return nil, fmt.Errorf("projections: re-fold run %s: %w", id, err)
			}
			from = e.StreamVersion + 1
		}
	}
	cfgs, err := readStream(l, events.EngineStream, upTo)
	if err != nil {
		return nil, err
	}
	for len(cfgs) > 0 && cfgs[0].Position <= after {
		cfgs = cfgs[1:]
	}
	if id == events.EngineStream {
		for _, c := range cfgs {
			Apply(scratch, c)
		}
		return scratch, nil
	}
	it := l.ReadStream(id, from)
	dec := events.NewDecoder()
	for n := 1; it.Next(); n++ {
		if n%foldCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				it.Close()
				return nil, &FoldStoppedError{Run: id, Read: n, Err: err}
			}
		}
		e := it.Event()
		if e.Position > upTo {
			break
		}
		for len(cfgs) > 0 && cfgs[0].Position < e.Position {
			Apply(scratch, cfgs[0])
			cfgs = cfgs[1:]
		}
		ev, err := FromLogWith(dec, e)
		if err != nil {
			it.Close()
			return nil, err
		}
		Apply(scratch, ev)
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("projections: re-fold run %s: %w", id, err)
	}
	for _, c := range cfgs {
		Apply(scratch, c)
	}
	return scratch, nil
}

// AssumePool makes the slot pool of s, a state RunAt folded from one run,
// what a recorded decision saw daemon-wide: held slots in all (the other
// runs' as a count, which no query lists by subId) and waiting
// other runs waiting for a slot, which SlotWaiters counts on top of the
// runs s holds. It is for re-running a recorded decision on the run's state
// with the daemon-wide inputs the decision recorded (events.Policy.Held and
// Waiting); a state so changed must not be folded further or published.
// NB: a count, not a holder each: a record's Held is whatever its log holds, so the slots beyond the run's own are
// counted without subtracting from Held, which wraps for the least int.
func (s *State) AssumePool(held, waiting int) {
	s.assumedHeld = max(held, len(s.held)) - len(s.held)
	s.assumedWaiters = max(waiting, 0)
}
