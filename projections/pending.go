package projections

// pendingTally follows one of a run's append-only lists whose entries leave
// their pending state once and never return to it (a mailbox's messages
// become acknowledged, a run's asks answered or timed out). It keeps how many
// entries are still pending and the ordinal of the first one still pending,
// so that a page of the pending entries knows its total without a walk of the
// list and starts its walk at the first pending entry: a box whose thousands
// of old messages are all acknowledged pages its inbox for the cost of the
// page, under the engine's read lock that the publisher waits for.
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
