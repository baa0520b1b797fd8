package commands

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
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

// mixedWorkload yields a deterministic sequence of commands touching every
// part of the state: runs, tasks, admissions and rejections, settlements,
// cancellations, config changes and clock expiries.
func mixedWorkload(f *engineFixture, emit func(id string, r Request)) {
	var subs []string
	n := 0
	next := func(actor Request) {
		n++
		id := fmt.Sprintf("cmd-%03d", n)
		actor.CommandID = id
		emit(id, actor)
	}
	orch := func(c Command) { next(Request{Principal: events.AdminPrincipal(), Actor: admin, Command: c}) }
	for r := 0; r < 2; r++ {
		run := fmt.Sprintf("R%d", r)
		orch(&RunCreate{RunID: run, Team: "t", Goal: "g", Cwd: "/w", BudgetTotal: optBudget(int64(50000 * r))})
		orch(&RunTransition{RunID: run, To: "running"})
		orch(&TaskCreate{RunID: run, TaskID: "02_exec", Role: "executor", Agent: "a", Title: "x", Cwd: "/w",
			StepID: "s"})
		orch(&TaskTransition{RunID: run, TaskID: "02_exec", To: "running"})
	}
	cfg := projections.DefaultConfig()
	cfg.MaxSlots = 3
	orch(&Configure{Config: cfg})
	for i := 0; i < 24; i++ {
		run := fmt.Sprintf("R%d", i%2)
		req := &DelegateRequest{RunID: run, TaskID: "02_exec", Prompt: "p", BudgetTokens: ptr(int64(9000))}
		if i%5 == 4 {
			req.Role = ptr("reviewer") // a recorded rejection
		}
		next(Request{Principal: events.WorkerPrincipal(run, "02_exec"), Actor: worker("02_exec"), Command: req})
		if len(subs) > 0 && i%3 == 2 {
			sub := subs[0]
			subs = subs[1:]
			runOf := "R0"
			if f.eng != nil {
				f.eng.Read(func(s *projections.State) {
					if _, ok := s.Delegation("R1", sub); ok {
						runOf = "R1"
					}
				})
			}
			if i%2 == 0 {
				orch(&DelegateSettle{RunID: runOf, SubID: sub, Outcome: OutcomeOK, Text: "ok",
					UsageTokens: ptr(int64(12000))})
			} else {
				orch(&DelegateCancel{RunID: runOf, SubID: sub, Reason: "test"})
			}
		}
		f.eng.Read(func(s *projections.State) {
			for _, d := range s.InFlight() {
				if !contains(subs, d.SubID) {
					subs = append(subs, d.SubID)
				}
			}
		})
	}
	orch(&RunTransition{RunID: "R1", To: "cancelled"})
}

// The engine crashed at every commit boundary of a mixed workload: the
// reopened state is exactly the state of the acknowledged commands, and each
// acknowledged command's outcome is still recorded.
func TestEngineCrashAtEveryCommit(t *testing.T) {
	fs := vfs.NewCrashableMem()
	clock := newTestClock()
	l, err := eventlog.Open("db", &eventlog.Options{FS: copyingFS(fs)})
	require.NoError(t, err)
	e, err := Open(l, Options{Clock: clock.Now, NewID: counterIDs(), SnapshotEvery: 7, ExpiryInterval: -1})
	require.NoError(t, err)
	f := &engineFixture{t: t, fs: fs, log: l, eng: e, clock: clock}

	type crash struct {
		fs     *vfs.MemFS
		state  *projections.State
		lastID string
		lastRq Request
		last   Reply
	}
	var crashes []crash
	rng := rand.New(rand.NewPCG(3, 4))
	mixedWorkload(f, func(id string, r Request) {
		reply, err := e.Submit(context.Background(), r)
		require.NoError(t, err)
		clock.Advance(time.Second)
		var st *projections.State
		e.Read(func(s *projections.State) { st = whole(t, s) })
		c := crash{state: st, lastID: id, lastRq: r, last: reply}
		c.fs = fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(2) * 50, RNG: rng})
		crashes = append(crashes, c)
	})
	// One expiry through the clock, as the last commit.
	clock.Advance(time.Hour)
	require.Positive(t, e.Tick(context.Background()))
	var final *projections.State
	e.Read(func(s *projections.State) { final = whole(t, s) })
	crashes = append(crashes, crash{fs: fs.CrashClone(vfs.CrashCloneCfg{}), state: final})
	require.NoError(t, e.Close())
	require.NoError(t, l.Close())
	require.Greater(t, len(crashes), 40)

	for i, c := range crashes {
		l, err := eventlog.Open("db", &eventlog.Options{FS: c.fs})
		require.NoError(t, err, "crash %d", i)
		e, err := Open(l, Options{Clock: clock.Now, NewID: counterIDs(), ExpiryInterval: -1})
		require.NoError(t, err, "crash %d", i)
		e.Read(func(s *projections.State) { require.Equal(t, c.state, whole(t, s), "crash %d", i) })
		if c.lastID != "" {
			r, err := e.Submit(context.Background(), c.lastRq)
			require.NoError(t, err)
			require.True(t, r.Replayed, "crash %d: %s is decided", i, c.lastID)
			require.Equal(t, c.last.Rejected, r.Rejected)
			if c.last.Rejected == nil {
				require.JSONEq(t, string(c.last.Result), string(r.Result))
			}
		}
		_, err = l.Verify(nil)
		require.NoError(t, err)
		require.NoError(t, e.Close())
		require.NoError(t, l.Close())
	}
}

// opRecorder takes, while armed, a crash clone of mem before every file-system operation and refuses hard links
// (copyingFS's reason).
type opRecorder struct {
	mem    *vfs.MemFS
	armed  atomic.Bool
	mu     sync.Mutex
	clones []*vfs.MemFS
}

func (c *opRecorder) MaybeError(op errorfs.Op) error {
	if op.Kind == errorfs.OpLink {
		return errorfs.ErrInjected
	}
	if c.armed.Load() {
		c.mu.Lock()
		n := len(c.clones)
		rng := rand.New(rand.NewPCG(uint64(n), 9))
		c.clones = append(c.clones, c.mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: (n % 3) * 50, RNG: rng}))
		c.mu.Unlock()
	}
	return nil
}

func (c *opRecorder) String() string { return "crash clone before every op" }

// Runs made cold at once and snapshots taken every few events, crashed before every file-system operation: the
// engine started on the recovered log holds the state a fold of that log from position 1 gives, cold runs included.
func TestEngineCrashBeforeEveryOpWithColdRuns(t *testing.T) {
	mem := vfs.NewCrashableMem()
	rec := &opRecorder{mem: mem}
	clock := newTestClock()
	l, err := eventlog.Open("db", &eventlog.Options{FS: errorfs.Wrap(mem, rec)})
	require.NoError(t, err)
	opts := Options{Clock: clock.Now, NewID: counterIDs(), SnapshotEvery: 3, ExpiryInterval: -1, Retention: -1}
	e, err := Open(l, opts)
	require.NoError(t, err)
	rec.armed.Store(true)
	for i := 0; i < 12; i++ {
		run := fmt.Sprintf("E%d", i)
		for j, c := range []Command{
			&RunCreate{RunID: run, Team: "t", Goal: "g", Cwd: "/w"},
			&RunTransition{RunID: run, To: "running"},
			&RunTransition{RunID: run, To: "cancelled"},
		} {
			r := Request{Principal: events.AdminPrincipal(), Actor: admin,
				CommandID: fmt.Sprintf("%s-%d", run, j), Command: c}
			_, err := e.Submit(context.Background(), r)
			require.NoError(t, err)
			clock.Advance(time.Second)
		}
	}
	rec.armed.Store(false)
	require.NoError(t, e.Close())
	require.NoError(t, l.Close())
	// NB: each of the 36 commands is a group of its own, at least its WAL write and its sync; the snapshots' and the
	// views' writes add more, but they run in the background and how many land before Close varies.
	require.GreaterOrEqual(t, len(rec.clones), 36*2)

	for i, fs := range rec.clones {
		full := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(1, 1))})
		l, err := eventlog.Open("db", &eventlog.Options{FS: fs})
		require.NoError(t, err, "crash %d", i)
		opts.NewID = counterIDs()
		e, err := Open(l, opts)
		require.NoError(t, err, "crash %d", i)
		var got *projections.State
		e.Read(func(s *projections.State) { got = whole(t, s) })
		require.NoError(t, e.Close())
		require.NoError(t, l.Close())

		// The fold from position 1 of the same log.
		l, err = eventlog.Open("db", &eventlog.Options{FS: full})
		require.NoError(t, err, "crash %d", i)
		require.NoError(t, l.DropSummaries(true))
		opts.NewID = counterIDs()
		e, err = Open(l, opts)
		require.NoError(t, err, "crash %d", i)
		e.Read(func(s *projections.State) { require.Equal(t, whole(t, s), got, "crash %d", i) })
		require.NoError(t, e.Close())
		require.NoError(t, l.Close())
	}
}
