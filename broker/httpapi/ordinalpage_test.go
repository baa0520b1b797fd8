package httpapi

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOrdinalPageHoldsAtMostItsLimit: a list paged by ordinal (a run's jobs) answers at most limit items, the cursor
// of the first left out (the ordinal, base 36) when there are more, none on the last page, and the count of all kept;
// a cursor may name the end of the list (an empty last page) but not past it.
func TestOrdinalPageHoldsAtMostItsLimit(t *testing.T) {
	all := []string{"a", "b", "c", "d"}
	keepAll := func(string) bool { return true }
	for _, tc := range []struct {
		name   string
		limit  int
		cursor string
		keep   func(string) bool
		items  []string
		next   string
		bad    bool
	}{
		{name: "a page of its limit, more after", limit: 3, keep: keepAll, items: []string{"a", "b", "c"}, next: "3"},
		{name: "the rest from the cursor", limit: 3, cursor: "3", keep: keepAll, items: []string{"d"}},
		{name: "exactly all", limit: 4, keep: keepAll, items: all},
		{name: "one", limit: 1, cursor: "1", keep: keepAll, items: []string{"b"}, next: "2"},
		{name: "the end", limit: 2, cursor: "4", keep: keepAll, items: []string{}},
		{name: "past the end", limit: 2, cursor: "5", keep: keepAll, bad: true},
		{name: "not base 36", limit: 2, cursor: "-", keep: keepAll, bad: true},
		{name: "kept ones only", limit: 1, keep: func(s string) bool { return s != "a" }, items: []string{"b"}, next: "2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pg, err := ordinalPage(all, tc.limit, tc.cursor, tc.keep)
			if tc.bad {
				var ae *apiError
				require.ErrorAs(t, err, &ae)
				require.Equal(t, codeBadCursor, ae.code)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.items, pg.items)
			require.Equal(t, tc.next, pg.next)
			kept := 0
			for _, s := range all {
				if tc.keep(s) {
					kept++
				}
			}
			require.Equal(t, kept, pg.total)
		})
	}
}
