package httpapi

import (
	"context"
	"errors"

	"github.com/crewlog/crewlog/projections"
)

// A rebuild (state?at, explain) reads its run's events from the log and folds them, O(the run), in the one rebuild
// slot; state?at=TIME reads the log's events up to its time first. One unit a request let a read-only token keep the
// slot and a core busy with rebuilds back to back, whatever the pace. So a paced read that rebuilds is charged, as
// one that reads a cold run back is (pacing.go), the events it read: its run's from the state it started on to its
// position, and the log's up to the first later than a time it resolved, that one included (audit.PositionAt's read).
// A rebuild that stops before its end (its client left, its credential went) keeps nothing, but the fold and the
// time's read count the events they had read by then (projections.FoldStoppedError, audit.PositionAt's read with its
// error): it is charged those, every event the server read for it, so leaving early saves the token only what was not
// read, and a request abandoned at once is not charged the whole log. A fold that failed otherwise (a read of the
// log) is charged the most it could have read, its run's events at the head. Explain also reads its decision's events
// before it folds, from audit.ExplainReach of them before its position (from thousands before, for the longest
// decisions), each charged as well, whether or not a fold follows.

// chargeFold charges the read of ctx with the events of run a rebuild folded into folded, on from base (nil: the
// run's first event), or, when it stopped first (folded nil), those its error says it read. run "" is no fold.
func (s *Server) chargeFold(ctx context.Context, run string, base, folded *projections.State, err error) {
	if run == "" || !charging(ctx) {
		return
	}
	var stopped *projections.FoldStoppedError
	if folded == nil && errors.As(err, &stopped) {
		chargeRead(ctx, int64(stopped.Read))
		return
	}
	n := runEvents(folded, run)
	if folded == nil {
		s.opts.Engine.Read(func(st *projections.State) { n = runEvents(st, run) })
	}
	chargeRead(ctx, n-runEvents(base, run))
}

// runEvents is the number of events of run in st (0 when st is nil or does not hold the run).
func runEvents(st *projections.State, run string) int64 {
	if st == nil {
		return 0
	}
	r, ok, _ := st.LookupRun(run)
	if !ok {
		return 0
	}
	return r.Usage.Events
}

// foldWatch is the audit.RunStates explain lends audit.ExplainAt: the server's kept states, noting the events read
// to find the decision, the run folded, the state the fold started from and the one it kept, for its charge
// (chargeFold).
type foldWatch struct {
	states     *stateCache
	searched   int
	run        string
	base, kept *projections.State
}

func (w *foldWatch) Searched(n int) { w.searched += n }

func (w *foldWatch) Base(run string, to uint64) *projections.State {
	w.run, w.base = run, w.states.Base(run, to)
	return w.base
}

func (w *foldWatch) Keep(s *projections.State) {
	w.kept = s
	w.states.Keep(s)
}
