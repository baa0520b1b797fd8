package picrew

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAFloodOfReportsDoesNotReportTheRecentOnesAgain: the set that keeps each report of a follower to once is bounded
// (maxReported); it was cleared whole once full, so that a flood of new reports (a worker making files by the
// thousand) had every problem reported so far reported again at once, the recent ones and those every pass meets (an
// unknown file that stays). It forgets the oldest first now: the reports of the last maxReported/2 problems, and one
// met again since, stay reported once, whatever comes after them; the oldest, forgotten, may be reported again.
func TestAFloodOfReportsDoesNotReportTheRecentOnesAgain(t *testing.T) {
	var reported []string
	fl := NewFollower(t.TempDir(), nil, &FollowOptions{Report: func(s Skipped) { reported = append(reported, s.Path) }})
	problem := func(i int) string { return fmt.Sprintf("f%06d", i) }
	meet := func(from, to int, also ...int) []string {
		reported = nil
		for i := from; i < to; i++ {
			fl.src.skip(runA, problem(i), 0, 0, "unknown file: not imported")
		}
		for _, i := range also {
			fl.src.skip(runA, problem(i), 0, 0, "unknown file: not imported")
		}
		fl.report()
		return reported
	}
	const steady = 0 // a problem every pass meets
	require.Equal(t, maxReported-10, len(meet(0, maxReported-10)), "each reported once")
	require.Equal(t, 10, len(meet(maxReported-10, maxReported, steady)), "the recent ones")
	for pass := range 8 {
		flood := maxReported + pass*maxReported/4
		require.Equal(t, maxReported/4, len(meet(flood, flood+maxReported/4, steady)),
			"a flood of new ones, pass %d: each reported once, the steady one not again", pass)
		require.Equal(t, 0, len(meet(flood+maxReported/4-maxReported/2, flood+maxReported/4, steady)),
			"the last maxReported/2, pass %d", pass)
	}
	require.Equal(t, []string{problem(1)}, meet(1, 2), "the oldest are forgotten")
	require.LessOrEqual(t, fl.reported.len(), maxReported, "bounded")
}
