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
	start := 0
	if f.Cursor != "" {
		c, err := strconv.ParseUint(f.Cursor, 36, 32)
		if err != nil || c > uint64(len(order)) {
			return Page[T]{}, fmt.Errorf("%w: %q", ErrBadCursor, f.Cursor)
		}
		start = int(c)
	}
	end := len(order)
	page := Page[T]{Total: len(order)}
	if f.Limit > 0 && end-start > f.Limit {
		end = start + f.Limit
		page.NextCursor = strconv.FormatUint(uint64(end), 36)
	}
	page.Items = make([]T, 0, end-start)
	for _, id := range order[start:end] {
		page.Items = append(page.Items, item(id))
	}
	return page, nil
}

// TasksPage returns a page of run runID's tasks in creation order (shadow
// tasks included), each with its allocation. An unknown run has no tasks.
func (s *State) TasksPage(runID string, f PageFilter) (Page[Task], error) {
	r := s.runs[runID]
	if r == nil {
		return Page[Task]{}, nil
	}
	return pageOf(r.taskOrder, f, func(id string) Task { return r.taskView(r.tasks[id]) })
}

// DelegationsPage returns a page of run runID's delegations in admission
// order.
func (s *State) DelegationsPage(runID string, f PageFilter) (Page[Delegation], error) {
	r := s.runs[runID]
	if r == nil {
		return Page[Delegation]{}, nil
	}
	return pageOf(r.delOrder, f, func(id string) Delegation { return *r.dels[id] })
}

// LedgerPage returns a page of run runID's accounts in the order they were
// opened.
func (s *State) LedgerPage(runID string, f PageFilter) (Page[Account], error) {
	r := s.runs[runID]
	if r == nil {
		return Page[Account]{}, nil
	}
	return pageOf(r.accountOrder, f, func(id string) Account { return *r.accounts[id].clone() })
}
