package commands

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// testClock is a settable engine clock.
type testClock struct{ ns atomic.Int64 }

func newTestClock() *testClock {
	c := &testClock{}
	c.ns.Store(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *testClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *testClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// counterIDs mints readable deterministic ids.
func counterIDs() func() string { return (&idCounter{}).next }

// idCounter mints counterIDs' ids from a count that a copy can start from.
type idCounter struct{ n atomic.Int64 }

func (c *idCounter) next() string { return fmt.Sprintf("%08d", c.n.Add(1)) }

type engineFixture struct {
	t     testing.TB
	fs    vfs.FS
	log   *eventlog.Log
	eng   *Engine
	clock *testClock
}

func openEngine(t testing.TB, fs vfs.FS, clock *testClock, cfg *projections.Config) *engineFixture {
	t.Helper()
	return openEngineWith(t, fs, clock, Options{Config: cfg})
}

// openEngineWith opens an engine with o on a new log in fs, on clock, with counted ids and no expiries.
func openEngineWith(t testing.TB, fs vfs.FS, clock *testClock, o Options) *engineFixture {
	t.Helper()
	l, err := eventlog.Open("db", &eventlog.Options{FS: fs})
	require.NoError(t, err)
	o.Clock, o.NewID, o.ExpiryInterval = clock.Now, counterIDs(), -1
	e, err := Open(l, o)
	require.NoError(t, err)
	f := &engineFixture{t: t, fs: fs, log: l, eng: e, clock: clock}
	t.Cleanup(f.close)
	return f
}

func (f *engineFixture) close() {
	if f.eng != nil {
		f.eng.Close()
		f.log.Close()
		f.eng = nil
	}
}

var (
	orchestrator = events.Actor{Role: events.RoleOrchestrator}
	admin        = events.Actor{Role: events.RoleAdmin}
)

// do submits a command and requires that it be accepted.
func (f *engineFixture) do(c Command) Reply {
	f.t.Helper()
	r, err := f.eng.Submit(context.Background(), Request{Actor: orchestrator, Command: c})
	require.NoError(f.t, err)
	require.Nil(f.t, r.Rejected, "%s rejected", c.Kind())
	return r
}

// seedRun creates a running run with one running executor task 02_exec.
func (f *engineFixture) seedRun(runID string, budget int64) {
	f.do(&RunCreate{RunID: runID, Team: "t", Goal: "g", Cwd: "/w", BudgetTotal: optBudget(budget)})
	f.do(&RunTransition{RunID: runID, To: "running"})
	f.do(&TaskCreate{RunID: runID, TaskID: "02_exec", Role: "executor", Agent: "a", Title: "exec", Cwd: "/w",
		StepID: "exec", Model: "anthropic/m1"})
	f.do(&TaskTransition{RunID: runID, TaskID: "02_exec", To: "running"})
}

func worker(task string) events.Actor { return events.Actor{Role: events.RoleWorker, TaskID: task} }

func ptr[T any](v T) *T { return &v }

// optBudget is a fixture's budgetTotal: 0 stands for unset.
func optBudget(n int64) *int64 {
	if n == 0 {
		return nil
	}
	return &n
}

// whole is s with every cold run read back and hot (projections.State.Whole):
// two states with the same answers are equal whatever each keeps cold.
func whole(t testing.TB, s *projections.State) *projections.State {
	t.Helper()
	w, err := s.Whole()
	require.NoError(t, err)
	return w
}

// copyingFS is fs with hard links refused, so that Pebble copies a snapshot's
// table into the store instead of linking it. NB: a crashable MemFS's Link
// deadlocks against a concurrent CrashClone (it takes the clone lock inside
// the tree's lock, CrashClone the other way round); a test that clones while
// the engine's background snapshot may be ingesting must open the log on
// this.
func copyingFS(fs vfs.FS) vfs.FS {
	return errorfs.Wrap(fs, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpLink {
			return errorfs.ErrInjected
		}
		return nil
	}))
}

// walFaults fails every operation of one of kinds on a WAL file while it is
// on.
func walFaults(kinds ...errorfs.OpKind) *errorfs.Toggle {
	return &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.HasSuffix(op.Path, ".log") && slices.Contains(kinds, op.Kind) {
			return errorfs.ErrInjected
		}
		return nil
	})}
}
