package projections

// pendingTally follows one of a run's append-only lists whose entries leave
// their pending state once and never return to it (a run's asks answered or
// timed out). It keeps how many entries are still pending and the ordinal of
// the first one still pending, so that a page of the pending entries knows its
// total without a walk of the list and starts its walk at the first pending
// entry. A settled entry after a pending one is still walked over
// (pendingOf); a mailbox, whose settled entries a worker piles up, keeps a
// pendingIndex instead.
type pendingTally struct {
	pending int // entries still pending
	first   int // ordinal of the first entry still pending; the list's length when none is
}

// appended records that entry n-1 of a list now n long was added, pending or
// not (a snapshot's entries come back settled).
func (t *pendingTally) appended(n int, pending bool) {
	switch {
	case pending:
		t.pending++
	case t.first == n-1:
		t.first = n
	}
}

// settled records that one pending entry of a list of n stopped pending;
// isSettled(i) says whether entry i has.
func (t *pendingTally) settled(n int, isSettled func(i int) bool) {
	t.pending--
	for t.first < n && isSettled(t.first) {
		t.first++
	}
}
