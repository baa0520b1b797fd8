package httpapi

import (
	"context"

	"github.com/crewlog/crewlog/projections"
)

// A rebuild (state?at, explain) reads its run's events from the log and folds them, O(the run), in the one rebuild
// slot; state?at=TIME reads the log's events up to its time first. One unit a request let a read-only token keep
// the slot and a core busy with rebuilds back to back, whatever the pace. So a paced read that rebuilds is charged,
// as one that reads a cold run back is (pacing.go), the events it read: its run's from the state it started on to
// its position, and the log's up to a time it resolved. A rebuild that stops before its end (its client left, or a
// read failed) kept nothing to count them by; it is charged the most it could have read (its run's events at the
// head, the log up to the head), so that leaving just before the answer does not make the rebuild free. Explain
// also reads its decision's events before it folds, from audit.ExplainReach of them before its position (from
// thousands before, for the longest decisions), each charged as well, whether or not a fold follows.

// chargeFold charges the read of ctx with the events of run a rebuild folded into folded (nil: it stopped first),
// on from base (nil: the run's first event). run "" is no fold.
func (s *Server) chargeFold(ctx context.Context, run string, base, folded *projections.State) {
	if run == "" || !charging(ctx) {
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
