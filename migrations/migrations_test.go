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
	}{{"testdata/format1", eventlog.FormatInitial}} {
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
