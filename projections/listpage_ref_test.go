package projections

import (
	"fmt"
	"strconv"
)

// ordinalPageOfWhole is how a run's list was paged before the projection
// paged it in place: over a copy of the whole list, the cursor the ordinal of
// the next item to look at, total the count of the items kept. It is the
// reference the in-place pages are compared with.
func ordinalPageOfWhole[T any](all []T, f PageFilter, keep func(T) bool) (Page[T], error) {
	start := 0
	if f.Cursor != "" {
		c, err := strconv.ParseUint(f.Cursor, 36, 32)
		if err != nil || c > uint64(len(all)) {
			return Page[T]{}, fmt.Errorf("%w: %q", ErrBadCursor, f.Cursor)
		}
		start = int(c)
	}
	var page Page[T]
	for i, it := range all {
		if !keep(it) {
			continue
		}
		page.Total++
		if i < start || page.NextCursor != "" {
			continue
		}
		if f.Limit > 0 && len(page.Items) == f.Limit {
			page.NextCursor = strconv.FormatUint(uint64(i), 36)
			continue
		}
		page.Items = append(page.Items, it)
	}
	return page, nil
}

func wholeAsksPage(s *State, runID string, pending bool, f PageFilter) (Page[Ask], error) {
	return ordinalPageOfWhole(s.Asks(runID), f, func(a Ask) bool { return !pending || a.Status == AskPending })
}

func wholeCredentialsPage(s *State, runID string, f PageFilter) (Page[Credential], error) {
	return ordinalPageOfWhole(s.Credentials(runID), f, func(Credential) bool { return true })
}
