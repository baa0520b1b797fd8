package migrations_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/migrations"
	"github.com/crewlog/crewlog/migrations/migrationstest"
	"github.com/crewlog/crewlog/projections"
)

var fixedNow = func() time.Time { return time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC) }

// The steps run from the first format to the current one without a gap.
func TestListReachesCurrentFormat(t *testing.T) {
	want := eventlog.FormatInitial
	names := map[string]bool{}
	for _, m := range migrations.List() {
		require.Equal(t, want, m.From, m.Name)
		require.Equal(t, m.From+1, m.To, m.Name)
		require.False(t, names[m.Name], "step names are unique")
		names[m.Name] = true
		require.NotEmpty(t, m.Doc)
		want = m.To
	}
	require.Equal(t, eventlog.CurrentFormat, want)
}

func TestPending(t *testing.T) {
	p, err := migrations.Pending(eventlog.FormatInitial)
	require.NoError(t, err)
	require.Len(t, p, len(migrations.List()))
	p, err = migrations.Pending(eventlog.CurrentFormat)
	require.NoError(t, err)
	require.Empty(t, p)
	_, err = migrations.Pending(eventlog.CurrentFormat + 1)
	require.ErrorIs(t, err, eventlog.ErrFormatTooNew)
}

// Every committed store of a past format opens (only for migration),
// migrates, verifies, folds to its golden projections, and a second run
// changes nothing.
func TestMigrateFixtures(t *testing.T) {
	for _, fx := range []struct {
		dir    string
		format uint32
	}{{"testdata/format1", eventlog.FormatInitial}, {"testdata/format2", eventlog.FormatStreamCatalog}} {
		t.Run(fx.dir, func(t *testing.T) {
			dir := migrationstest.CopyDir(t, fx.dir)
			_, err := eventlog.Open(dir, nil)
			require.ErrorIs(t, err, eventlog.ErrFormatTooOld, "a writer may not open an old store")

			l, err := eventlog.Open(dir, &eventlog.Options{AllowOlderFormat: true})
			require.NoError(t, err)
			f, err := l.Format()
			require.NoError(t, err)
			require.Equal(t, fx.format, f)
			before := migrationstest.ViewOf(t, l)
			head, _ := l.Head()

			dry, err := migrations.Run(l, &migrations.Options{DryRun: true})
			require.NoError(t, err)
			require.Len(t, dry.Applied, int(eventlog.CurrentFormat-fx.format))
			h, _ := l.Head()
			require.Equal(t, head, h, "a dry run writes nothing")

			rep, err := migrations.Run(l, &migrations.Options{Now: fixedNow})
			require.NoError(t, err)
			require.Equal(t, fx.format, rep.From)
			require.Equal(t, eventlog.CurrentFormat, rep.To)
			require.Len(t, rep.Applied, len(dry.Applied))
			f, err = l.Format()
			require.NoError(t, err)
			require.Equal(t, eventlog.CurrentFormat, f)
			_, err = l.Verify(nil)
			require.NoError(t, err)

			// The steps are recorded as store.migrated on the engine stream.
			last := rep.Applied[len(rep.Applied)-1]
			r, err := l.Event(last.Position)
			require.NoError(t, err)
			ev, err := projections.FromLog(&r)
			require.NoError(t, err)
			require.Equal(t, events.EngineStream, ev.Stream)
			require.Equal(t, &events.StoreMigrated{From: last.From, To: last.To, Name: last.Name}, ev.Payload)

			after := migrationstest.ViewOf(t, l)
			require.Equal(t, before, after, "a format step does not change what the log means")
			migrationstest.Golden(t, fx.dir+".golden.json", after)
			streams, err := l.Streams()
			require.NoError(t, err)
			require.Len(t, streams, 2) // $engine and the run

			head, _ = l.Head()
			again, err := migrations.Run(l, nil)
			require.NoError(t, err)
			require.Empty(t, again.Applied, "a second run does nothing")
			h, _ = l.Head()
			require.Equal(t, head, h)
			require.NoError(t, l.Close())

			l, err = eventlog.Open(dir, nil)
			require.NoError(t, err, "a migrated store opens for writing")
			require.NoError(t, l.Close())
		})
	}
}

// The format-2 fixture was written by crewlog at format 2 (commit 052e7aa)
// through its engine: an admin's run.create, the orchestrator's run and
// task commands, a worker's admission and recorded rejection, an
// orchestrator's rejection that wrote no event, and a clock expiry. After
// the step to format 3 every outcome sits under the principal its events
// name (the admin when it wrote none), none is lost, and verify checks each
// against its events.
func TestFormat2OutcomesMoveToTheirPrincipals(t *testing.T) {
	dir := migrationstest.CopyDir(t, "testdata/format2")
	l, err := eventlog.Open(dir, &eventlog.Options{AllowOlderFormat: true})
	require.NoError(t, err)
	defer l.Close()
	before, err := l.Verify(nil)
	require.NoError(t, err)
	_, err = migrations.Run(l, &migrations.Options{Now: fixedNow})
	require.NoError(t, err)

	const run = "team_20261101090000_a1b2c3d4e5f60002"
	want := map[string]events.Principal{
		"create-run":                     events.AdminPrincipal(),
		"run-running":                    events.OrchestratorPrincipal(run),
		"create-task-1":                  events.OrchestratorPrincipal(run),
		"start-task-1":                   events.OrchestratorPrincipal(run),
		"d-1":                            events.WorkerPrincipal(run, "02_exec"),
		"d-2":                            events.WorkerPrincipal(run, "02_exec"),
		"bad-transition":                 events.AdminPrincipal(),
		"expire:" + run + ":gc-00000001": events.EnginePrincipal(),
	}
	all := []events.Principal{events.AdminPrincipal(), events.EnginePrincipal(), events.OrchestratorPrincipal(run),
		events.WorkerPrincipal(run, "02_exec")}
	for id, p := range want {
		o, err := l.Outcome(p.Key(), id)
		require.NoError(t, err, "%s moved to %+v", id, p)
		require.Nil(t, o.Fingerprint, "a moved outcome has no fingerprint")
		for _, other := range all {
			if other != p {
				_, err := l.Outcome(other.Key(), id)
				require.ErrorIs(t, err, eventlog.ErrNotFound, "%s is only %+v's", id, p)
			}
		}
	}
	d2, err := l.Outcome(events.WorkerPrincipal(run, "02_exec").Key(), "d-2")
	require.NoError(t, err)
	require.Equal(t, "role-denied", d2.Reason, "the recorded answer moved with it")

	rep, err := l.Verify(&eventlog.VerifyOptions{Principal: func(dst []byte, ev *eventlog.Event) []byte {
		return events.EventPrincipal(ev.ActorRole, ev.Stream, ev.ActorTask, ev.CorrelationID).AppendKey(dst)
	}})
	require.NoError(t, err)
	require.Equal(t, before.Commands+2, rep.Commands,
		"every outcome moved, plus the records of this step and the next")
	require.Equal(t, len(want), before.Commands)
}
