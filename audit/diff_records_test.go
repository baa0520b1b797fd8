package audit

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/projections"
)

// TestDiffPairsRecordsByID: the records of a list (runs, tasks, delegations, accounts) are paired by their id, so one
// record that a side lacks is one difference, where the lists were compared index by index and every record after
// it was compared with its neighbour: each field that told them apart a difference, and the record lacking named
// only at the end of the list, as the last one.
func TestDiffPairsRecordsByID(t *testing.T) {
	run := func(id string, tasks ...any) map[string]any {
		return map[string]any{"run": map[string]any{"runId": id}, "tasks": tasks}
	}
	task := func(id, status string) map[string]any { return map[string]any{"id": id, "status": status} }
	for _, c := range []struct {
		name string
		a, b any
		want []Difference
	}{
		{"a run the right side lacks",
			[]any{run("r1"), run("r2"), run("r3")}, []any{run("r2"), run("r3")},
			[]Difference{{"$[0]", `{"run":{"runId":"r1"},"tasks":null}`, absent}}},
		{"a run the left side lacks",
			[]any{run("r2"), run("r3")}, []any{run("r1"), run("r2"), run("r3")},
			[]Difference{{"$[0]", absent, `{"run":{"runId":"r1"},"tasks":null}`}}},
		{"a task lacking, and another changed",
			[]any{run("r1", task("t1", "running"), task("t2", "running"), task("t3", "running"))},
			[]any{run("r1", task("t1", "running"), task("t3", "completed"))},
			[]Difference{
				{"$[0].tasks[1]", `{"id":"t2","status":"running"}`, absent},
				{"$[0].tasks[2].status", `"running"`, `"completed"`},
			}},
		{"delegations by subId, not by their parent's taskId",
			[]any{map[string]any{"subId": "gc-1", "taskId": "t1"}, map[string]any{"subId": "gc-2", "taskId": "t1"}},
			[]any{map[string]any{"subId": "gc-2", "taskId": "t1"}},
			[]Difference{{"$[0]", `{"subId":"gc-1","taskId":"t1"}`, absent}}},
		{"ids that repeat: index by index",
			[]any{task("t1", "running"), task("t1", "failed")}, []any{task("t1", "failed")},
			[]Difference{{"$[0].status", `"running"`, `"failed"`}, {"$[1]", `{"id":"t1","status":"failed"}`, absent}}},
		{"a run the left side lacks, met at another index than on the right",
			[]any{run("r0"), run("r1"), run("r3")}, []any{run("r1"), run("r2"), run("r3")},
			[]Difference{
				{"$[0]", `{"run":{"runId":"r0"},"tasks":null}`, absent},
				{"$[1]", absent, `{"run":{"runId":"r2"},"tasks":null}`},
			}},
		{"ids that repeat on one side only: index by index",
			[]any{task("t1", "running"), task("t1", "failed")}, []any{task("t2", "running")},
			[]Difference{{"$[0].id", `"t1"`, `"t2"`}, {"$[1]", `{"id":"t1","status":"failed"}`, absent}}},
		{"records in another order: index by index",
			[]any{task("t1", "running"), task("t2", "running")}, []any{task("t2", "running"), task("t1", "running")},
			[]Difference{{"$[0].id", `"t1"`, `"t2"`}, {"$[1].id", `"t2"`, `"t1"`}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := Diff(c.a, c.b)
			require.NoError(t, err)
			require.Equal(t, c.want, d)
		})
	}
}

// TestCompareSnapshotLackingARun: a snapshot that lacks one run of the log (tampered, or written by a fold that lost
// one) differs from the rebuilt state by that run alone, where each of the 99 runs after it was compared with the run
// before it and thousands of differences were listed, the run lacking last.
func TestCompareSnapshotLackingARun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	l, err := eventlog.Open(dir, nil)
	require.NoError(t, err)
	head, err := audittest.Large(l, 3000)
	require.NoError(t, err)
	const lacking = "team_20261001090000_0000000000000000"
	s := projections.New()
	it := l.Read(1)
	for it.Next() {
		ev, err := projections.FromLog(it.Event())
		require.NoError(t, err)
		if ev.Stream != lacking {
			projections.Apply(s, ev)
		}
		s.Position = ev.Position
	}
	require.NoError(t, it.Close())
	b, err := projections.EncodeSnapshot(s)
	require.NoError(t, err)
	require.NoError(t, l.SaveSnapshot(head, b))
	require.NoError(t, l.Close())

	l, err = Open(dir)
	require.NoError(t, err)
	defer l.Close()
	res, err := Replay(l, ReplayOptions{})
	require.NoError(t, err)
	d, err := CompareSnapshot(l, res.State, "", 0)
	require.NoError(t, err)
	require.Len(t, d.Differences, 1, "first: %v", d.Differences[0])
	require.Equal(t, "$.runs[0]", d.Differences[0].Path)
	require.Contains(t, d.Differences[0].Left, lacking)
	require.Equal(t, absent, d.Differences[0].Right)
}
