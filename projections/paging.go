package projections

import (
	"fmt"
	"strconv"
)

// PageFilter selects a page of one run's records (tasks, delegations,
// ledger accounts) in creation order.
type PageFilter struct {
	// Limit caps the page; 0 means no cap.
	Limit int
	// Cursor is NextCursor of the previous page; empty starts at the first.
	Cursor string
}

// Page is one page of a run's records. Total counts all of the run's
// records; NextCursor is empty on the last page.
type Page[T any] struct {
	Items      []T
	NextCursor string
	Total      int
}

// pageOf cuts a page out of order, a run's append-only list of ids in
// creation order. The cursor is the ordinal of the next id to return, so it
// stays valid while records are added between two pages (none is removed).
func pageOf[T any](order []string, f PageFilter, item func(id string) T) (Page[T], error) {
	start, end, next, err := pageRange(len(order), f)
	if err != nil {
		return Page[T]{}, err
	}
	page := Page[T]{Total: len(order), NextCursor: next, Items: make([]T, 0, end-start)}
	for _, id := range order[start:end] {
		page.Items = append(page.Items, item(id))
	}
	return page, nil
}

// pageRange is the page [start, end) of a list of n entries that f selects,
// and the cursor of the next page ("" on the last).
func pageRange(n int, f PageFilter) (start, end int, next string, err error) {
	if start, err = cursorAt(f.Cursor, n); err != nil {
		return 0, 0, "", err
	}
	end = n
	if f.Limit > 0 && end-start > f.Limit {
		end = start + f.Limit
		next = strconv.FormatUint(uint64(end), 36)
	}
	return start, end, next, nil
}

// cursorAt is the ordinal cursor names in a list of n entries: 0 for "",
// ErrBadCursor for anything but a base-36 ordinal of at most n.
func cursorAt(cursor string, n int) (int, error) {
	if cursor == "" {
		return 0, nil
	}
	c, err := strconv.ParseUint(cursor, 36, 32)
	if err != nil || c > uint64(n) {
		return 0, fmt.Errorf("%w: %q", ErrBadCursor, cursor)
	}
	return int(c), nil
}

// cursorAtMost is cursor, or the cursor of the end of a list of n entries when cursor names an ordinal past it
// (MailboxFilter.PastEndIsEmpty: a page past the end is empty, not refused). Anything else is left for cursorAt.
func cursorAtMost(cursor string, n int) string {
	if c, err := strconv.ParseUint(cursor, 36, 32); err == nil && c > uint64(n) {
		return strconv.FormatUint(uint64(n), 36)
	}
	return cursor
}

// selection is the entries of a list a filter keeps: next(i) is the first entry kept at or after ordinal i, or the
// list's length when none is (nil keeps all), and total counts the entries kept.
type selection struct {
	next  func(i int) int
	total int
}

// everything selects every entry of a list of n.
func everything(n int) selection { return selection{total: n} }

// pendingIn selects the entries of a list that x follows still pending.
func pendingIn(x *pendingIndex) selection {
	if x == nil {
		x = &pendingIndex{} // a recipient no message was sent to
	}
	return selection{total: x.pending, next: x.next}
}

// from is the first entry sel keeps at or after ordinal i of a list of n.
func (sel selection) from(i, n int) int {
	if sel.next == nil || i >= n {
		return i
	}
	return sel.next(i)
}

// filteredPage cuts a page out of a run's append-only list of n entries in
// place: sel picks the entries, item(i) copies entry i out. Only the page's
// entries are copied, and only the entries sel finds them by are looked at.
// The cursor is the ordinal of the next entry to look at (the first kept one
// left out), so it stays valid while entries are added. Items is nil when the
// page is empty.
//
// NB: it runs under the engine's read lock, which the publisher waits for:
// it must cost the page, not the run, and change nothing.
func filteredPage[T any](n int, f PageFilter, sel selection, item func(i int) T) (Page[T], error) {
	start, err := cursorAt(f.Cursor, n)
	if err != nil {
		return Page[T]{}, err
	}
	page := Page[T]{Total: sel.total}
	for i := sel.from(start, n); i < n; i = sel.from(i+1, n) {
		if f.Limit > 0 && len(page.Items) == f.Limit {
			page.NextCursor = strconv.FormatUint(uint64(i), 36)
			break
		}
		if page.Items == nil {
			page.Items = make([]T, 0, pageCap(n-i, f.Limit))
		}
		page.Items = append(page.Items, item(i))
	}
	return page, nil
}

// pageCap is the room a page needs when left entries remain: at most limit
// (0: no cap).
func pageCap(left, limit int) int {
	if limit > 0 {
		return min(left, limit)
	}
	return left
}

// TasksPage returns a page of run runID's tasks in creation order (shadow
// tasks included), each with its allocation. An unknown run has no tasks; a
// cold run the log cannot give back is an error (ErrNotReadBack), as it is
// for every page of a run's records.
func (s *State) TasksPage(runID string, f PageFilter) (Page[Task], error) {
	r, err := s.lookupRun(runID)
	if r == nil {
		return Page[Task]{}, err
	}
	return pageOf(r.taskOrder, f, func(id string) Task { return r.taskView(r.tasks[id]) })
}

// TaskDependsOn returns a page of the tasks task taskID of run runID depends on, in the order task.created listed
// them; ok is false when the run has no such task. The list never changes once recorded, so the cursor, an ordinal
// into it, stays valid. NB: only the page is copied, not the list of up to events.MaxDependsOn ids.
func (s *State) TaskDependsOn(runID, taskID string, f PageFilter) (p Page[string], ok bool, err error) {
	r, err := s.lookupRun(runID)
	if r == nil || r.tasks[taskID] == nil {
		return Page[string]{}, false, err
	}
	deps := r.tasks[taskID].DependsOn
	start, end, next, err := pageRange(len(deps), f)
	if err != nil {
		return Page[string]{}, true, err
	}
	return Page[string]{Items: append([]string{}, deps[start:end]...), NextCursor: next, Total: len(deps)}, true, nil
}

// DelegationsPage returns a page of run runID's delegations in admission
// order.
func (s *State) DelegationsPage(runID string, f PageFilter) (Page[Delegation], error) {
	r, err := s.lookupRun(runID)
	if r == nil {
		return Page[Delegation]{}, err
	}
	return pageOf(r.delOrder, f, func(id string) Delegation { return *r.dels[id] })
}

// LedgerPage returns a page of run runID's accounts in the order they were
// opened.
func (s *State) LedgerPage(runID string, f PageFilter) (Page[Account], error) {
	r, err := s.lookupRun(runID)
	if r == nil {
		return Page[Account]{}, err
	}
	return pageOf(r.accountOrder, f, func(id string) Account { return *r.accounts[id].clone() })
}

// LedgerPageWithin is LedgerPage copying an account's history only when it holds at most maxHistory entries
// (reservations and charges together): one with more is given without it (AccountInPage.HistoryOmitted), its totals
// and counts whole (a reader that shows only the counts, the dashboard's list, passes 0). Why: a page runs under the
// engine's read lock and must cost the page, not the run, and one account's history may hold most of its run (a
// task's every metered delegation, a reservation and a charge each); a reader that sends no history past a bound
// (the broker's frame) copies none past it.
func (s *State) LedgerPageWithin(runID string, f PageFilter, maxHistory int) (Page[AccountInPage], error) {
	r, err := s.lookupRun(runID)
	if r == nil {
		return Page[AccountInPage]{}, err
	}
	return pageOf(r.accountOrder, f, func(id string) AccountInPage {
		a := r.accounts[id]
		in := AccountInPage{ReservationCount: len(a.Reservations), ChargeCount: len(a.Charges)}
		if in.ReservationCount+in.ChargeCount <= maxHistory {
			in.Account = *a.clone()
			return in
		}
		in.Account, in.HistoryOmitted = *a, true
		in.Reservations, in.Charges = nil, nil
		return in
	})
}

// LedgerHistory is one page of an account's history: its reservations, then
// its charges, as one list (entries 0..len(reservations)-1 are the
// reservations). Total is the length of that list.
type LedgerHistory struct {
	Reservations []Reservation
	Charges      []Charge
	NextCursor   string
	Total        int
}

// AccountHistory returns a page of the history of task taskID's account in
// run runID; ok is false when the task has no account. The cursor is an
// ordinal into the append-only list, so it stays valid as the account grows.
func (s *State) AccountHistory(runID, taskID string, f PageFilter) (h LedgerHistory, ok bool, err error) {
	r, err := s.lookupRun(runID)
	if r == nil || r.accounts[taskID] == nil {
		return LedgerHistory{}, false, err
	}
	a := r.accounts[taskID]
	nr := len(a.Reservations)
	start, end, next, err := pageRange(nr+len(a.Charges), f)
	if err != nil {
		return LedgerHistory{}, true, err
	}
	h = LedgerHistory{Reservations: []Reservation{}, Charges: []Charge{}, NextCursor: next,
		Total: nr + len(a.Charges)}
	if start < nr {
		h.Reservations = append(h.Reservations, a.Reservations[start:min(end, nr)]...)
	}
	if end > nr {
		h.Charges = append(h.Charges, a.Charges[max(start, nr)-nr:end-nr]...)
	}
	return h, true, nil
}
