package commands

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/projections"
)

// openUnreadableCold opens an engine on a store where run C00 has ended and gone cold (its view written, another
// run decoded in its place) and run H is running, with a block cache too small to keep a block, and the reads of
// the store's files given to faults (eioToggle: while on, C00 cannot be read back from the log). The engine logs
// its errors to logs.
func openUnreadableCold(t *testing.T, logs io.Writer, faults errorfs.Injector) *engineFixture {
	t.Helper()
	mem, clock := vfs.NewMem(), newTestClock()
	o := Options{Retention: -1, ColdCache: 1}
	f := openEngineWith(t, mem, clock, o)
	endRuns(t, f, "C", 2)
	require.Nil(t, f.submitAs(admin, &RunCreate{RunID: "H", Team: "t", Goal: "g", Cwd: "/w"}).Rejected)
	require.Nil(t, f.submitAs(orchestrator, &RunTransition{RunID: "H", To: "running"}).Rejected)
	f.viewsWritten()
	f.eng.saveSnapshot() // holds C00 cold, its view written: the next start reads none of it
	f.close()            // NB: a reopened store holds every event in its tables, none in a memtable

	l, err := eventlog.Open("db", &eventlog.Options{FS: errorfs.Wrap(mem, faults), CacheSize: 1,
		MemTableSize: 1 << 12})
	require.NoError(t, err)
	o.Clock, o.NewID, o.ExpiryInterval = clock.Now, counterIDs(), -1
	o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelError}))
	e, err := Open(l, o)
	require.NoError(t, err)
	f = &engineFixture{t: t, fs: mem, log: l, eng: e, clock: clock}
	t.Cleanup(f.close)
	endRuns(t, f, "D", 1) // D00 takes the one place of the decoded cold runs
	require.Nil(t, f.submitAs(admin, &RunCreate{RunID: "N", Team: "t", Goal: "g", Cwd: "/w"}).Rejected)
	f.viewsWritten()
	e.Read(func(s *projections.State) { require.True(t, s.IsCold("C00") && s.IsCold("D00")) })
	return f
}

// eioToggle fails every read of a table (EIO) while it is on.
func eioToggle() *errorfs.Toggle {
	return &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.HasSuffix(op.Path, ".sst") && op.Kind == errorfs.OpFileReadAt {
			return &os.PathError{Op: "read", Path: op.Path, Err: syscall.EIO}
		}
		return nil
	})}
}

// A command naming a cold run whose summary cannot be read back from the log is refused with the read's error, as
// projections.ErrNotReadBack, and nothing is recorded: it was decided as for no run, so a reopen was refused
// no-manifest (recorded for good with a commandId) and a run.create of the run's id was accepted, a second
// run.created that contradicts the run's history (here its append, which reads the run's stream, failed too and
// stopped the engine for every principal).
func TestACommandToAnUnreadableColdRunIsRefusedAndTheEngineGoesOn(t *testing.T) {
	var logs bytes.Buffer
	eio := eioToggle()
	f := openUnreadableCold(t, &logs, eio)
	e := f.eng
	reopen := &RunTransition{RunID: "C00", To: "running"}

	eio.On()
	_, err := e.Submit(context.Background(), Request{Actor: orchestrator, Command: reopen})
	recreate := &RunCreate{RunID: "C00", Team: "t", Goal: "again", Cwd: "/w"}
	_, cerr := e.Submit(context.Background(), Request{Actor: admin, Command: recreate})
	eio.Off()
	require.ErrorIs(t, cerr, projections.ErrNotReadBack, "a run.create of a cold run's id")
	require.ErrorIs(t, err, projections.ErrNotReadBack)
	require.NotErrorIs(t, err, ErrFailed, "the engine stopped")
	require.Equal(t, 2, strings.Count(logs.String(), "\n"), "logged once a request: %s", logs.String())
	require.Contains(t, logs.String(), "run=C00")
	e.Read(func(s *projections.State) {
		require.True(t, s.IsCold("C00"), "nothing was decided for the run")
		run, ok := s.Run("C00")
		require.True(t, ok)
		require.Equal(t, "completed", string(run.Status))
		require.Equal(t, "g", run.Goal)
	})

	// The engine goes on: another run's command, and the same command once the run can be read.
	require.Nil(t, f.submitAs(orchestrator, &RunTransition{RunID: "H", To: "completed"}).Rejected)
	require.Nil(t, f.submitAs(orchestrator, reopen).Rejected)
}

// A cold run whose summary is read but whose records are not (its view and its events: the reads of a table fail
// once the cold store has begun to read the run back) is refused the same way: the engine went on to fail stop, as
// after a commit error, answering every principal's command internal until crewd restarted, and the same command
// sent again stopped it again.
func TestACommandToAColdRunWhoseRecordsCannotBeReadDoesNotStopTheEngine(t *testing.T) {
	var logs bytes.Buffer
	faults := &readsOnceFolding{}
	f := openUnreadableCold(t, &logs, faults)
	e := f.eng
	e.Read(func(s *projections.State) { faults.cold = s.ColdStore() })

	faults.arm()
	reopen := &RunTransition{RunID: "C00", To: "running"}
	_, err := e.Submit(context.Background(), Request{Actor: orchestrator, Command: reopen})
	require.Positive(t, faults.disarm(), "the run's records were not read")
	require.ErrorIs(t, err, projections.ErrNotReadBack)
	require.NotErrorIs(t, err, ErrFailed, "the engine stopped")
	require.Contains(t, logs.String(), "run=C00")

	require.Nil(t, f.submitAs(orchestrator, &RunTransition{RunID: "H", To: "completed"}).Rejected)
	require.Nil(t, f.submitAs(orchestrator, reopen).Rejected)
}

// readsOnceFolding fails every read of a table, while armed, once the cold store has begun to read a run back
// since it was armed (ColdStore.Refolds counts a read back as it begins): the summary's reads pass, the records'
// fail. NB: by the store's own count, not by counting the tables' reads, which Pebble's background compactions
// take part in and which moved the failure to another read (the append's, which stops the engine).
type readsOnceFolding struct {
	cold   *projections.ColdStore // set before arm
	armed  atomic.Bool
	from   atomic.Int64 // the count of read backs when armed
	failed atomic.Int64
}

func (r *readsOnceFolding) arm() {
	r.from.Store(r.cold.Refolds())
	r.failed.Store(0)
	r.armed.Store(true)
}

// disarm returns how many reads it failed.
func (r *readsOnceFolding) disarm() int64 {
	r.armed.Store(false)
	return r.failed.Load()
}

func (r *readsOnceFolding) MaybeError(op errorfs.Op) error {
	if !strings.HasSuffix(op.Path, ".sst") || op.Kind != errorfs.OpFileReadAt {
		return nil
	}
	if !r.armed.Load() || r.cold.Refolds() == r.from.Load() {
		return nil
	}
	r.failed.Add(1)
	return &os.PathError{Op: "read", Path: op.Path, Err: syscall.EIO}
}

func (r *readsOnceFolding) String() string { return "readsOnceFolding" }
