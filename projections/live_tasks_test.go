package projections

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// A task's start or end finds its place among the run's live tasks by their creation ordinals, kept beside them,
// not by looking each one compared up in the run's map of tasks: both folds of every settled delegation end its
// shadow task, in a map that holds every task the run ever had. The other records are taken out of the run (a
// look-up of one panics), and the live tasks must still be the ones not ended, in creation order.
func TestLiveTasksPlacedWithoutLookingTasksUp(t *testing.T) {
	for _, n := range []int{1, 2, 3, 100} {
		for _, k := range []int{0, n / 2, n - 1} {
			var h history
			fixture(&h, 0, true)
			for i := range n {
				h.add(runR, events.TypeTaskCreated, &events.TaskCreated{TaskID: fmt.Sprintf("t%03d", i),
					Role: "executor", Agent: "a", Cwd: "/w"})
			}
			s := fold(h.evs)
			r := s.runs[runR]
			id := fmt.Sprintf("t%03d", k)
			tk := r.tasks[id]
			want := append([]string{taskP}, r.live[1:1+k]...)
			want = append(want, r.live[2+k:]...)
			kept := r.tasks
			r.tasks = map[string]*Task{}
			require.NotPanics(t, func() { r.setTaskStatus(tk, TaskCompleted) }, "n=%d k=%d: end", n, k)
			require.Equal(t, want, r.live, "n=%d k=%d", n, k)
			require.NotPanics(t, func() { r.setTaskStatus(tk, TaskQueued) }, "n=%d k=%d: retry", n, k)
			r.tasks = kept
			for i := range n {
				require.Equal(t, fmt.Sprintf("t%03d", i), r.live[1+i], "n=%d k=%d: the retried task back in place",
					n, k)
			}
			require.Equal(t, s.Tasks(runR)[0].TaskID, r.live[0])
		}
	}
}
