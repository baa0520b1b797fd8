package picrew_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/migrations/migrationstest"
	"github.com/crewlog/crewlog/migrations/picrew"
	"github.com/crewlog/crewlog/migrations/picrew/picrewtest"
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

// TestImportSkipsWhatTheStoreRefuses: a record the store cannot take — a
// message whose body is above the store's payload limit, one whose id makes
// a command id longer than the log's limit — is reported and left out, and
// the rest of its run is imported: the run's writes are one append, and a
// refused write would otherwise fail them all, and the import with them.
// A second import reports the same and appends nothing.
func TestImportSkipsWhatTheStoreRefuses(t *testing.T) {
	root, err := picrewtest.New(t.TempDir())
	require.NoError(t, err)
	run, err := root.NewRun("team_20261201120000_00000000000000aa")
	require.NoError(t, err)
	require.NoError(t, run.AddTask("01_plan", "planner"))
	big, err := run.Message("01_plan", strings.Repeat("x", 4096))
	require.NoError(t, err)
	long := strings.Repeat("m", events.MaxIDChars-6) // NB: an id an import records, its command id too long
	require.NoError(t, picrewtest.AppendRaw(filepath.Join(run.Dir, "mailbox", "tasks", "01_plan", "inbox.jsonl"),
		[]byte(`{"id":"`+long+`","taskId":"01_plan","body":"hi","createdAt":"2026-12-01T12:00:00.000Z"}`+"\n")))
	small, err := run.Message("01_plan", "fits")
	require.NoError(t, err)

	// A small limit stands for a body of megabytes.
	l, err := eventlog.Open("db", &eventlog.Options{FS: vfs.NewMem(), MaxPayloadBytes: 1024})
	require.NoError(t, err)
	defer l.Close()
	sum, err := picrew.Import(l, root.Dir, nil)
	require.NoError(t, err)
	var reasons []string
	for _, s := range sum.Skipped {
		reasons = append(reasons, s.Reason)
	}
	all := strings.Join(reasons, "\n")
	require.Contains(t, all, "import:"+run.ID+":msg:"+big+": not imported: eventlog: invalid append: payload of")
	require.Contains(t, all, `"msg:`+long[:60])
	require.Contains(t, all,
		"an id too long to name its import (a command id of 298 bytes, at most 256): not imported")

	engine := events.EnginePrincipal().Key()
	for _, id := range []string{"run", "task:01_plan", "msg:" + small} {
		_, err := l.Outcome(engine, "import:"+run.ID+":"+id)
		require.NoError(t, err, "%s is imported", id)
	}
	_, err = l.Outcome(engine, "import:"+run.ID+":msg:"+big)
	require.ErrorIs(t, err, eventlog.ErrNotFound)
	_, err = l.Verify(nil)
	require.NoError(t, err)

	again, err := picrew.Import(l, root.Dir, nil)
	require.NoError(t, err)
	require.Zero(t, again.Appended)
	require.Equal(t, again.Runs[0].Writes, again.Runs[0].Existing)
	require.Equal(t, sum.Skipped, again.Skipped)
}
