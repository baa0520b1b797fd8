package projections

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// TestPageOfRunRecordsEndsOnTheLastPage: a page of a run's records (pageRange: tasks, delegations, the ledger, a
// task's dependencies, an account's history) names the next page's cursor only while records are left after it, so a
// page that ends exactly at the list's end is the last; a cursor may name the end (an empty last page), never past it.
func TestPageOfRunRecordsEndsOnTheLastPage(t *testing.T) {
	var h history
	h.add(runR, events.TypeRunCreated, &events.RunCreated{Team: "t"})
	for i := range 6 {
		h.add(runR, events.TypeTaskCreated, &events.TaskCreated{TaskID: fmt.Sprintf("t%d", i), Role: "executor"})
	}
	s := fold(h.evs)
	for _, tc := range []struct {
		limit      int
		cursor     string
		want       []string
		nextCursor string
	}{
		{3, "", []string{"t0", "t1", "t2"}, "3"},
		{3, "3", []string{"t3", "t4", "t5"}, ""},
		{5, "", []string{"t0", "t1", "t2", "t3", "t4"}, "5"},
		{6, "", []string{"t0", "t1", "t2", "t3", "t4", "t5"}, ""},
		{0, "4", []string{"t4", "t5"}, ""},
		{2, "6", []string{}, ""},
	} {
		name := fmt.Sprintf("limit %d from %q", tc.limit, tc.cursor)
		p, err := s.TasksPage(runR, PageFilter{Limit: tc.limit, Cursor: tc.cursor})
		require.NoError(t, err, name)
		got := []string{}
		for _, task := range p.Items {
			got = append(got, task.TaskID)
		}
		require.Equal(t, tc.want, got, name)
		require.Equal(t, tc.nextCursor, p.NextCursor, name)
		require.Equal(t, 6, p.Total, name)
	}
	_, err := s.TasksPage(runR, PageFilter{Cursor: "7"})
	require.ErrorIs(t, err, ErrBadCursor, "a cursor past the end")
}
