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
	if f.Cursor != "" {
		c, err := strconv.ParseUint(f.Cursor, 36, 32)
		if err != nil || c > uint64(n) {
			return 0, 0, "", fmt.Errorf("%w: %q", ErrBadCursor, f.Cursor)
		}
		start = int(c)
	}
	end = n
	if f.Limit > 0 && end-start > f.Limit {
		end = start + f.Limit
		next = strconv.FormatUint(uint64(end), 36)
	}
	return start, end, next, nil
}

// TasksPage returns a page of run runID's tasks in creation order (shadow
// tasks included), each with its allocation. An unknown run has no tasks.
func (s *State) TasksPage(runID string, f PageFilter) (Page[Task], error) {
	r := s.run(runID)
	if r == nil {
		return Page[Task]{}, nil
	}
	return pageOf(r.taskOrder, f, func(id string) Task { return r.taskView(r.tasks[id]) })
}

// DelegationsPage returns a page of run runID's delegations in admission
// order.
func (s *State) DelegationsPage(runID string, f PageFilter) (Page[Delegation], error) {
	r := s.run(runID)
	if r == nil {
		return Page[Delegation]{}, nil
	}
	return pageOf(r.delOrder, f, func(id string) Delegation { return *r.dels[id] })
}

// LedgerPage returns a page of run runID's accounts in the order they were
// opened.
func (s *State) LedgerPage(runID string, f PageFilter) (Page[Account], error) {
	r := s.run(runID)
	if r == nil {
		return Page[Account]{}, nil
	}
	return pageOf(r.accountOrder, f, func(id string) Account { return *r.accounts[id].clone() })
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
	r := s.run(runID)
	if r == nil || r.accounts[taskID] == nil {
		return LedgerHistory{}, false, nil
	}
	a := r.accounts[taskID]
	nr := len(a.Reservations)
	start, end, next, err := pageRange(nr+len(a.Charges), f)
	if err != nil {
		return LedgerHistory{}, true, err
	}
	h = LedgerHistory{Reservations: []Reservation{}, Charges: []Charge{}, NextCursor: next, Total: nr + len(a.Charges)}
	if start < nr {
		h.Reservations = append(h.Reservations, a.Reservations[start:min(end, nr)]...)
	}
	if end > nr {
		h.Charges = append(h.Charges, a.Charges[max(start, nr)-nr:end-nr]...)
	}
	return h, true, nil
}
