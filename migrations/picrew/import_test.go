package picrew_test

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/migrations/migrationstest"
	"github.com/crewlog/crewlog/migrations/picrew"
	"github.com/crewlog/crewlog/projections"
)

// testdata/root is a pi-crew crew root built from the shapes of D§1–§3: a
// finished run whose event log was compacted (the live file starts at seq
// 5, an archive holds 1..3) with a corrupt line, a seq gap, lock files, a
// quarantined tasks.json, mailboxes with delivery state and two shadow
// tasks (one whose delegate events were lost); and a running run with the
// envelope form of tasks.json, a parked task and steering entries.
func TestImportPicrew(t *testing.T) {
	l, err := eventlog.Open("db", &eventlog.Options{FS: vfs.NewMem()})
	require.NoError(t, err)
	defer l.Close()

	sum, err := picrew.Import(l, "testdata/root", nil)
	require.NoError(t, err)
	require.Len(t, sum.Runs, 2)
	require.Positive(t, sum.Appended)
	require.Zero(t, sum.Existing)
	migrationstest.Golden(t, "testdata/import.summary.golden.json", sum)
	migrationstest.Golden(t, "testdata/import.golden.json", migrationstest.ViewOf(t, l))

	_, err = l.Verify(nil)
	require.NoError(t, err)
	chk, err := audit.Check(l, nil)
	require.NoError(t, err)
	require.Empty(t, chk.Problems, "the imported log keeps crewlog's invariants")

	head, _ := l.Head()
	again, err := picrew.Import(l, "testdata/root", nil)
	require.NoError(t, err)
	require.Zero(t, again.Appended, "a second import adds nothing")
	require.Equal(t, sum.Appended > 0, again.Existing > 0)
	for i, r := range again.Runs {
		require.Equal(t, r.Writes, r.Existing)
		require.Equal(t, sum.Runs[i].Writes, r.Writes)
	}
	h, _ := l.Head()
	require.Equal(t, head, h)
	require.Equal(t, sum.Skipped, again.Skipped, "the same things are reported again")
}

func TestImportNotACrewRoot(t *testing.T) {
	l, err := eventlog.Open("db", &eventlog.Options{FS: vfs.NewMem()})
	require.NoError(t, err)
	defer l.Close()
	_, err = picrew.Import(l, t.TempDir(), nil)
	require.ErrorContains(t, err, "picrew: ")
	require.ErrorContains(t, err, "is not a pi-crew crew root")
}

// TestImportKeepsForeignEvents: an event without a crewlog counterpart (pi-crew's task.progress) is kept as
// foreign.imported with its type, seq, time, message and data, tells itself in the timeline, and changes no
// projection: the run's state is the same as with the event left out.
func TestImportKeepsForeignEvents(t *testing.T) {
	l, err := eventlog.Open("db", &eventlog.Options{FS: vfs.NewMem()})
	require.NoError(t, err)
	defer l.Close()
	_, err = picrew.Import(l, "testdata/root", nil)
	require.NoError(t, err)

	var kept []events.Event
	it := l.Read(1)
	for it.Next() {
		if it.Event().Type == events.TypeForeignImported {
			ev, err := projections.FromLog(it.Event())
			require.NoError(t, err)
			kept = append(kept, ev)
		}
	}
	require.NoError(t, it.Err())
	it.Close()
	require.Len(t, kept, 1)
	require.Equal(t, &events.ForeignImported{Source: "picrew", Type: "task.progress", Seq: 6,
		Time: "2026-10-02T08:10:05.000Z", Data: `{"taskIds":["02_exec"],"readyCount":1}`}, kept[0].Payload)
	require.Equal(t, "team_20261002080000_0123456789abcdef", kept[0].Stream)
	require.Equal(t, "picrew task.progress (seq 6)", audit.Describe(kept[0]))

	with := projections.New()
	require.NoError(t, projections.Replay(with, l, 0))
	without := projections.New()
	it = l.Read(1)
	for it.Next() {
		if it.Event().Type != events.TypeForeignImported {
			ev, err := projections.FromLog(it.Event())
			require.NoError(t, err)
			projections.Apply(without, ev)
		}
	}
	require.NoError(t, it.Err())
	it.Close()
	run := "team_20261002080000_0123456789abcdef"
	a, _ := with.Run(run)
	b, _ := without.Run(run)
	require.Equal(t, b, a, "a foreign event changes no projection")
	require.Equal(t, without.Tasks(run), with.Tasks(run))
}
