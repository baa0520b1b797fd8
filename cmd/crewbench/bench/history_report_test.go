package bench

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHistoryReportCountsTheRunsTheQueriesWentRound: the report says how many finished runs the queries went round,
// which is querySample only in a history that has that many; a small one (20 runs, 2 active) has 18, and the report
// said 200 of it.
func TestHistoryReportCountsTheRunsTheQueriesWentRound(t *testing.T) {
	for _, tc := range []struct {
		runs, active int
		want         string
	}{
		{1000, 10, "go round 200 finished runs"},
		{20, 2, "go round 18 finished runs"},
		{3, 2, "go round 1 finished runs"},
	} {
		var b strings.Builder
		require.NoError(t, (&HistoryReport{Runs: tc.runs, Active: tc.active}).WriteMarkdown(&b))
		require.Contains(t, b.String(), tc.want)
		require.Len(t, finishedRunSample(tc.runs, tc.active), sampledRuns(tc.runs, tc.active))
	}
}
