package commands

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"math"
	"os"
	"strings"
	"sync"
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

	l, err := eventlog.Open("db", &eventlog.Options{FS: errorfs.Wrap(mem, faults), CacheSize: 1, MemTableSize: 1 << 12})
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

// A cold run whose summary is read but whose records are not (its view and its events: the reads of a table after
// the summary's fail) is refused the same way: the engine went on to fail stop, as after a commit error, answering
// every principal's command internal until crewd restarted, and the same command sent again stopped it again.
func TestACommandToAColdRunWhoseRecordsCannotBeReadDoesNotStopTheEngine(t *testing.T) {
	var logs bytes.Buffer
	reads := &readsAfter{}
	f := openUnreadableCold(t, &logs, reads)
	e := f.eng
	// How many reads of a table the run's summary takes: the reads after those are of its records.
	reads.arm(math.MaxInt)
	e.Read(func(s *projections.State) {
		_, ok, err := s.LookupRunStatus("C00")
		require.NoError(t, err)
		require.True(t, ok)
	})
	summary := reads.disarm()
	require.Positive(t, summary)

	reads.arm(summary)
	reopen := &RunTransition{RunID: "C00", To: "running"}
	_, err := e.Submit(context.Background(), Request{Actor: orchestrator, Command: reopen})
	require.Greater(t, reads.disarm(), summary, "the run's records were not read")
	require.ErrorIs(t, err, projections.ErrNotReadBack)
	require.NotErrorIs(t, err, ErrFailed, "the engine stopped")
	require.Contains(t, logs.String(), "run=C00")

	require.Nil(t, f.submitAs(orchestrator, &RunTransition{RunID: "H", To: "completed"}).Rejected)
	require.Nil(t, f.submitAs(orchestrator, reopen).Rejected)
}

// readsAfter fails every read of a table once allow reads have been let through since it was armed (arm).
type readsAfter struct {
	mu      sync.Mutex
	armed   bool
	allowed int
	seen    int
}

func (r *readsAfter) arm(allow int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.armed, r.allowed, r.seen = true, allow, 0
}

func (r *readsAfter) disarm() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.armed = false
	return r.seen
}

func (r *readsAfter) MaybeError(op errorfs.Op) error {
	if !strings.HasSuffix(op.Path, ".sst") || op.Kind != errorfs.OpFileReadAt {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.armed {
		return nil
	}
	r.seen++
	if r.seen > r.allowed {
		return &os.PathError{Op: "read", Path: op.Path, Err: syscall.EIO}
	}
	return nil
}

func (r *readsAfter) String() string { return "readsAfter" }
