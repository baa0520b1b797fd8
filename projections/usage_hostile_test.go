package projections

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
	m "github.com/crewlog/crewlog/events/msgpackappend"
)

// A run's budget use is the sum of what its tasks' last reports count, whatever a log that commands did not write
// records (task.usage bounds each counter to 0..events.MaxUsageTokens, an older or damaged log need not): a negative
// counter counts nothing, as a negative spend adds nothing to the ledger (events.AddSpend), and one beyond the bound
// counts as the bound, so that the run's sum never saturates and a report that replaces a huge one takes off what
// it counted, no more. The fold took the difference of two reports as it came: a negative counter handed the budget
// back, a report replacing one of the least counts wrapped to a use of math.MinInt64, and one replacing a saturated
// report took every other task's use off with it.
func TestAHostileUsageReportCountsWithinTheBound(t *testing.T) {
	const bound = events.MaxUsageTokens
	type report struct {
		task string
		u    events.TaskUsage
	}
	for _, c := range []struct {
		name    string
		reports []report
		want    int64
	}{
		{"negative counters", []report{
			{"a", events.TaskUsage{Input: -1000, Output: 5}}, {"b", events.TaskUsage{Input: 500}},
		}, 505},
		{"the least then the most", []report{
			{"a", events.TaskUsage{Input: math.MinInt64 / 2, Output: math.MinInt64 / 2}},
			{"a", events.TaskUsage{Input: math.MaxInt64 / 2, Output: math.MaxInt64 / 2,
				CacheWrite: math.MaxInt64 / 2}},
		}, 3 * bound},
		{"the most, then replaced", []report{
			{"a", events.TaskUsage{Input: math.MaxInt64}}, {"b", events.TaskUsage{Input: 10}},
			{"a", events.TaskUsage{}},
		}, 10},
		{"beyond the bound, beside others", []report{
			{"a", events.TaskUsage{Input: bound + 1, CacheWrite: math.MaxInt64}}, {"b", events.TaskUsage{Output: 7}},
		}, 2*bound + 7},
		{"within the bound", []report{
			{"a", events.TaskUsage{Input: bound, Output: bound, CacheWrite: bound, CacheRead: bound}},
			{"b", events.TaskUsage{Input: 3}}, {"a", events.TaskUsage{Input: 1}},
		}, 4},
	} {
		var h history
		fixture(&h, 1000, false)
		for _, task := range []string{"a", "b"} {
			h.add(runR, events.TypeTaskCreated, &events.TaskCreated{TaskID: task, Role: "executor",
				Agent: "a", Title: "T", Cwd: "/w", StepID: "s"})
		}
		for _, rep := range c.reports {
			u := rep.u
			u.TaskID = rep.task
			h.add(runR, events.TypeTaskUsage, &u)
		}
		s := fold(h.evs)
		run, ok := s.Run(runR)
		require.True(t, ok)
		require.Equal(t, c.want, run.BudgetUsed, c.name)
		var sum int64
		for _, task := range s.Tasks(runR) {
			sum += task.Usage.Budgeted()
		}
		require.Equal(t, sum, run.BudgetUsed, "%s: the sum of the tasks' counts", c.name)
	}
}

// A snapshot or a view is refused when a run's budget use is not the sum of what its tasks' reports count: one
// written by the fold before the bound (TestAHostileUsageReportCountsWithinTheBound) kept the sum of the counters
// as a log recorded them (-495 for reports of -1000+5 and 500), and was read, so a daemon started from it answered
// and decided with a use that the rebuild from position 1 does not give (505). Refused, the state is rebuilt.
func TestASnapshotOfABudgetUseItsTasksDoNotCountIsRefused(t *testing.T) {
	var h history
	fixture(&h, 1000, false)
	for _, task := range []string{"a", "b"} {
		h.add(runR, events.TypeTaskCreated, &events.TaskCreated{TaskID: task, Role: "executor",
			Agent: "a", Title: "T", Cwd: "/w", StepID: "s"})
	}
	h.add(runR, events.TypeTaskUsage, &events.TaskUsage{TaskID: "a", Input: -1000, Output: 5})
	h.add(runR, events.TypeTaskUsage, &events.TaskUsage{TaskID: "b", Input: 500})
	s := fold(h.evs)
	b, err := EncodeSnapshot(s)
	require.NoError(t, err)
	decoded, err := DecodeSnapshot(b)
	require.NoError(t, err, "the fold's own snapshot is read")
	require.Equal(t, s, decoded)

	s.runs[runR].run.BudgetUsed = -495 // as the fold before the bound kept it
	b, err = EncodeSnapshot(s)
	require.NoError(t, err)
	_, err = DecodeSnapshot(b)
	require.ErrorIs(t, err, ErrBadSnapshot, "the snapshot")
	require.ErrorContains(t, err, "budget use")

	r := s.runs[runR]
	sr := snapshotRunOf(r)
	view, err := appendSnapshotRun(m.Uint16(nil, SnapshotFormat), &sr, nil)
	require.NoError(t, err)
	_, err = decodeRunView(view, runR, r.last)
	require.ErrorIs(t, err, ErrBadSnapshot, "the view")
}
