package projections

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// TaskHeader is Task without the task's dependencies, question and allocation, and copies none of them:
// delegate.request reads its parent's with it on the writer, for every request a worker sends.
func TestTaskHeaderIsTheTaskWithoutItsCopies(t *testing.T) {
	var h history
	fixture(&h, 10_000, false)
	admitBatch(&h, "gc-1", 0, true, 5_000)
	h.add(runR, events.TypeTaskWaiting, &events.TaskWaiting{TaskID: taskP, QuestionID: "q1"})
	s := fold(h.evs)

	full, ok := s.Task(runR, taskP)
	require.True(t, ok)
	require.NotEmpty(t, full.DependsOn)
	require.NotNil(t, full.Waiting)
	require.NotNil(t, full.Allocation, "the fixture's parent has an allocation")
	head, ok := s.TaskHeader(runR, taskP)
	require.True(t, ok)
	full.DependsOn, full.Waiting, full.Allocation = nil, nil, nil
	require.Equal(t, full, head)
	require.Zero(t, testing.AllocsPerRun(100, func() { _, _ = s.TaskHeader(runR, taskP) }))

	for _, q := range [][2]string{{runR, "nope"}, {"nope", taskP}} {
		head, ok := s.TaskHeader(q[0], q[1])
		require.False(t, ok, "%v", q)
		require.Equal(t, Task{}, head)
	}
}
