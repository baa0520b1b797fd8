package picrew_test

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/migrations/migrationstest"
	"github.com/crewlog/crewlog/migrations/picrew"
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
