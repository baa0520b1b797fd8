package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// modelSteps is the number of random commands of the model test;
// CREWLOG_MODEL_STEPS raises it for a soak run.
func modelSteps() int { return stepsFromEnv("CREWLOG_MODEL_STEPS", 10_000) }

// modelSeed is the first word of a model test's random source: def, the seed every run replays, unless
// CREWLOG_MODEL_SEED names another (a soak run's way to walk a history the kept seed does not). A seed other than
// def is logged, so a failure names what replays it.
func modelSeed(t *testing.T, def uint64) uint64 {
	s := os.Getenv("CREWLOG_MODEL_SEED")
	if s == "" {
		return def
	}
	seed, err := strconv.ParseUint(s, 10, 64)
	require.NoError(t, err, "CREWLOG_MODEL_SEED")
	t.Logf("seed %d (CREWLOG_MODEL_SEED=%d replays it)", seed, seed)
	return seed
}

// stepsFromEnv is the positive integer in environment variable name, else
// def: how a soak run raises a model test's steps.
func stepsFromEnv(name string, def int) int {
	if s, err := strconv.Atoi(os.Getenv(name)); err == nil && s > 0 {
		return s
	}
	return def
}

// randomCommand draws a valid or invalid command against what exists.
func randomCommand(rng *rand.Rand, s *projections.State, runs []string) Request {
	run := runs[rng.IntN(len(runs))]
	tasks := s.Tasks(run)
	// Mostly a running task (shadow tasks included: grandchildren delegate
	// too), sometimes any task.
	task := "02_exec"
	var running []string
	for _, t := range tasks {
		if t.Status == projections.TaskRunning {
			running = append(running, t.TaskID)
		}
	}
	switch {
	case len(running) > 0 && rng.IntN(4) > 0:
		task = running[rng.IntN(len(running))]
	case len(tasks) > 0 && rng.IntN(2) == 0:
		task = tasks[rng.IntN(len(tasks))].TaskID
	}
	// Mostly an in-flight delegation, sometimes a settled or unknown one.
	dels := s.Delegations(run)
	var live []string
	for _, d := range dels {
		if !d.Status.Terminal() {
			live = append(live, d.SubID)
		}
	}
	sub := "gc-missing"
	switch {
	case len(live) > 0 && rng.IntN(4) > 0:
		sub = live[rng.IntN(len(live))]
	case len(dels) > 0 && rng.IntN(5) > 0:
		sub = dels[rng.IntN(len(dels))].SubID
	}
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	orch := func(c Command) Request {
		return Request{Principal: events.OrchestratorPrincipal(run), Actor: orchestrator, Command: c}
	}
	switch rng.IntN(16) {
	case 0, 1, 2, 3, 11, 12, 13:
		prompt := "find X"
		if rng.IntN(10) == 0 {
			prompt = ""
		}
		req := &DelegateRequest{RunID: run, TaskID: task, Prompt: prompt}
		switch rng.IntN(12) {
		case 0:
			// Extremes: the bound, just above it, and what no bound expects.
			req.BudgetTokens = ptr(pickInt64(rng, MaxBudgetTokens, MaxBudgetTokens+1, math.MaxInt64, math.MinInt64))
		case 1, 2, 3, 4, 5:
			req.BudgetTokens = ptr(int64(rng.IntN(8000)) - 100)
		}
		if rng.IntN(4) == 0 {
			req.Role = ptr(pick("explorer", "analyst", "executor", "reviewer"))
		}
		if rng.IntN(4) == 0 {
			req.TimeoutSec = ptr(float64(rng.IntN(100000)))
		}
		if rng.IntN(6) == 0 {
			req.Model = ptr(pick("anthropic/m1", "openai/m2", "x/y"))
		}
		return Request{Principal: events.WorkerPrincipal(run, task), Actor: worker(task), Command: req}
	case 4, 5, 15:
		var usage *int64
		switch rng.IntN(10) {
		case 0:
			// Extremes: the bound (accepted), above it and MaxInt64
			// (refused), so a wrapped sum would show in the ledger.
			usage = ptr(pickInt64(rng, MaxUsageTokens, MaxUsageTokens+1, math.MaxInt64))
		case 1, 2, 3, 4:
			usage = ptr(int64(rng.IntN(30000)))
		}
		return orch(&DelegateSettle{RunID: run, SubID: sub,
			Outcome: pick(OutcomeOK, OutcomeOK, OutcomeFailed, OutcomeTimedOut, OutcomeCancelled, "bogus"),
			Text:    "--- end delegate x ---\nresult", UsageTokens: usage})
	case 6:
		return orch(&DelegateSpawned{RunID: run, SubID: sub, PID: rng.IntN(3)})
	case 7:
		return orch(&DelegateCancel{RunID: run, SubID: sub})
	case 8:
		// Workflow tasks only (shadows follow their delegations), 02_exec
		// most often, so the main parent keeps coming back to running.
		wf := "02_exec"
		if rng.IntN(2) == 0 {
			for _, t := range tasks {
				if !t.Shadow() && rng.IntN(3) == 0 {
					wf = t.TaskID
				}
			}
		}
		to := pick("running", "running", "running", "queued", "queued", "completed", "failed", "cancelled", "waiting")
		return orch(&TaskTransition{RunID: run, TaskID: wf, To: to})
	case 9:
		if rng.IntN(8) > 0 {
			return orch(&RunTransition{RunID: run, To: "running"})
		}
		return orch(&RunTransition{RunID: run, To: pick("blocked", "completed", "failed", "cancelled", "bogus")})
	case 10, 14:
		return orch(&TaskCreate{RunID: run, TaskID: fmt.Sprintf("t%d", rng.IntN(20)), Role: pick("executor",
			"explorer"),
			Agent: "a", Title: "t", Cwd: pick("/w", "/w2"), StepID: "s", Depth: rng.IntN(5)})
	default:
		cfg := projections.DefaultConfig()
		cfg.MaxSlots = 1 + rng.IntN(4)
		cfg.MaxDepth = rng.IntN(6) // 0 is invalid
		cfg.NestingEnabled = rng.IntN(20) > 0
		cfg.UnmeteredDelegates = pick(events.UnmeteredAllow, events.UnmeteredAllow, events.UnmeteredDeny)
		cfg.BudgetMode = pick(events.BudgetModePicrew, events.BudgetModePicrew, events.BudgetModeNested)
		if rng.IntN(3) == 0 {
			cfg.ModelCatalog = []string{"anthropic/m1"}
		}
		return Request{Principal: events.AdminPrincipal(), Actor: admin, Command: &Configure{Config: cfg}}
	}
}

func pickInt64(rng *rand.Rand, xs ...int64) int64 { return xs[rng.IntN(len(xs))] }

// invariants checks the model invariants between two published states.
type invariants struct {
	spent    map[string]int64 // run/task → tokensSpent seen last
	granted  map[string]int64
	admitted map[string]bool // subIds ever admitted
	terminal map[string]bool // subIds with a terminal event
	held     int             // slots held in the last state seen
}

func (iv *invariants) check(t *testing.T, s *projections.State, runs []string) {
	inFlight := 0
	for _, run := range runs {
		for _, a := range s.Ledger(run) {
			k := run + "/" + a.TaskID
			require.GreaterOrEqual(t, a.TokensSpent, iv.spent[k], "tokensSpent never decreases (%s)", k)
			if g, ok := iv.granted[k]; ok {
				require.Equal(t, g, a.TokensGranted, "tokensGranted is write-once (%s)", k)
			}
			iv.spent[k], iv.granted[k] = a.TokensSpent, a.TokensGranted
			var sum int64
			for _, r := range a.Reservations {
				sum += r.Tokens
			}
			for _, c := range a.Charges {
				sum += c.Tokens
			}
			require.Equal(t, sum, a.TokensSpent, "tokensSpent = Σ reservations + Σ charges (%s)", k)
		}
		for _, d := range s.Delegations(run) {
			if !d.Status.Terminal() {
				inFlight++
			}
		}
	}
	sl := s.Slots()
	require.Equal(t, inFlight, sl.Held, "held slots = in-flight delegations")
	iv.held = sl.Held
}

// The model test: random valid and invalid commands through the engine,
// invariants after every step, and at the end the incremental state equals
// a fold of the log from position 1 and the newest snapshot plus the tail.
//
// Command ids: a quarter of the commands draw theirs from a small pool
// shared by every principal (orchestrators of three runs, their workers, the
// admin), and some are exact retries, so ids collide within and across
// principals all the time; idModel checks every answer against what that
// principal was answered before.
func TestModel(t *testing.T) {
	clock := newTestClock()
	fs := vfs.NewMem()
	l, err := eventlog.Open("db", &eventlog.Options{FS: fs})
	require.NoError(t, err)
	e, err := Open(l, Options{Clock: clock.Now, NewID: counterIDs(), SnapshotEvery: 997, ExpiryInterval: -1})
	require.NoError(t, err)
	f := &engineFixture{t: t, fs: fs, log: l, eng: e, clock: clock}
	runs := []string{"R0", "R1", "R2"}
	for i, run := range runs {
		f.seedRun(run, int64(i)*60000) // R0 unmetered, R1 and R2 budgeted
	}
	ids := &idModel{recorded: map[string]*idRecord{}, users: map[string]map[string]bool{},
		eventless: map[string]int{}, eventlessRuns: map[string]int{}}
	iv := &invariants{spent: map[string]int64{}, granted: map[string]int64{}, admitted: map[string]bool{},
		terminal: map[string]bool{}}
	rng := rand.New(rand.NewPCG(modelSeed(t, 11), 12))
	steps := modelSteps()
	accepted, rejected := 0, 0
	reasons := map[string]int{}
	for i := 0; i < steps; i++ {
		var req Request
		e.Read(func(s *projections.State) { req = randomCommand(rng, s, runs) })
		req.CommandID = fmt.Sprintf("m-%05d", i)
		if rng.IntN(4) == 0 {
			req.CommandID = idPool[rng.IntN(len(idPool))]
		}
		if rng.IntN(10) == 0 && len(ids.order) > 0 {
			req = ids.recorded[ids.order[rng.IntN(len(ids.order))]].req // an exact retry
		}
		before := e.Head()
		r, err := e.Submit(context.Background(), req)
		require.NoError(t, err)
		if !ids.check(t, l, req, r, before, e.Head()) {
			continue // answered from the record or refused: nothing was decided
		}
		if r.Rejected != nil {
			reasons[r.Rejected.Reason]++
			rejected++
		} else {
			accepted++
		}
		if d, ok := req.Command.(*DelegateRequest); ok && r.Rejected == nil {
			var res DelegateResult
			require.NoError(t, json.Unmarshal(r.Result, &res))
			require.False(t, iv.admitted[res.GrandchildTaskRef], "no subId admitted twice")
			iv.admitted[res.GrandchildTaskRef] = true
			_ = d
		}
		iv.checkNewEvents(t, l, before, e.Head())
		e.Read(func(s *projections.State) { iv.check(t, s, runs) })
		if rng.IntN(50) == 0 {
			clock.Advance(time.Duration(rng.IntN(2000)) * time.Second)
			before := e.Head()
			e.Tick(context.Background())
			iv.checkNewEvents(t, l, before, e.Head())
			e.Read(func(s *projections.State) { iv.check(t, s, runs) })
		}
	}
	require.Positive(t, accepted)
	require.Positive(t, rejected)
	require.Positive(t, ids.replayed, "exact retries were answered from the record")
	require.Positive(t, ids.reused, "reused ids were refused")
	require.Positive(t, ids.shared, "principals shared ids")
	_, err = l.Verify(&eventlog.VerifyOptions{Principal: appendEventPrincipal})
	require.NoError(t, err, "every outcome names the principal its events do")

	var live *projections.State
	e.Read(func(s *projections.State) { live = whole(t, s) })
	full := projections.New()
	require.NoError(t, projections.Replay(full, l, 0))
	require.Equal(t, live, whole(t, full), "incremental == fold from position 1")
	require.NoError(t, e.Close())
	snapped, info, err := projections.Load(l)
	require.NoError(t, err)
	require.NotZero(t, info.SnapshotPosition, "a snapshot was used")
	require.Equal(t, live, whole(t, snapped), "incremental == snapshot + tail")
	require.NoError(t, l.Close())
	t.Logf("%d steps: %d accepted, %d rejected, %d admitted, head %d; rejections %v; ids: %d replayed, %d refused "+
		"as reused, %d shared across principals, %d not recorded past the bounds of outcomes with no event", steps,
		accepted, rejected, len(iv.admitted), full.Position, reasons, ids.replayed, ids.reused, ids.shared,
		ids.unrecorded)
}

// checkNewEvents checks the events one command appended against the state
// before it: an admission never takes a slot beyond capacity, a reservation
// never exceeds what remained of the grant, and a delegation gets at most
// one terminal event (the fold ignores a second, so this reads the log).
func (iv *invariants) checkNewEvents(t *testing.T, l *eventlog.Log, from, to uint64) {
	eachNewEvent(t, l, from, to, func(ev events.Event) {
		switch p := ev.Payload.(type) {
		case *events.DelegateAdmitted:
			require.Equal(t, iv.held, p.Policy.Held, "the policy saw the real slot count")
			require.Less(t, p.Policy.Held, p.Policy.Capacity, "held slots stay within capacity")
		case *events.BudgetReserved:
			k := ev.Stream + "/" + p.TaskID
			granted, ok := iv.granted[k]
			if !ok {
				granted = p.GrantedTokens
			}
			require.LessOrEqual(t, iv.spent[k]+p.Tokens, granted, "no metered admission beyond the grant (%s)", k)
		case *events.DelegateCompleted, *events.DelegateFailed, *events.DelegateTimedOut, *events.DelegateCancelled:
			sub := terminalSub(ev.Payload)
			require.False(t, iv.terminal[sub], "delegation %s has more than one terminal event", sub)
			iv.terminal[sub] = true
		}
	})
}

// eachNewEvent calls f with each event at positions from+1..to, decoded; the model tests check what one step
// appended with it.
func eachNewEvent(t *testing.T, l *eventlog.Log, from, to uint64, f func(events.Event)) {
	if to <= from {
		return
	}
	it := l.Read(from + 1)
	defer it.Close()
	for it.Next() {
		ev, err := projections.FromLog(it.Event())
		require.NoError(t, err)
		f(ev)
	}
	require.NoError(t, it.Err())
}

func terminalSub(p any) string {
	switch p := p.(type) {
	case *events.DelegateCompleted:
		return p.SubID
	case *events.DelegateFailed:
		return p.SubID
	case *events.DelegateTimedOut:
		return p.SubID
	case *events.DelegateCancelled:
		return p.SubID
	}
	return ""
}

// idPool is the small set of command ids every principal of the model test
// draws from, so that ids collide; "expire:…" looks like the engine's own.
var idPool = []string{"k0", "k1", "k2", "create-task-1", "expire:R1:gc-00000001"}

// idModel is what each principal's command ids were answered: the model of
// SPEC §2 "Whose id it is".
type idModel struct {
	recorded map[string]*idRecord       // principal key + NUL + id → first decision
	order    []string                   // keys of recorded, in order (deterministic picks)
	users    map[string]map[string]bool // id → principal keys that used it
	// eventless and eventlessRuns count the recorded outcomes that wrote no event, by principal key and by run
	// (MaxEventlessOutcomes, MaxEventlessOutcomesPerRun): past the bounds such an outcome is not recorded.
	eventless, eventlessRuns map[string]int
	replayed, reused, shared int
	unrecorded               int
}

type idRecord struct {
	req   Request
	fp    []byte
	reply Reply
}

// check checks one answer against the model and records a new decision. It
// reports whether the command was decided now (not answered from the
// record, not refused as a reused id).
func (m *idModel) check(t *testing.T, l *eventlog.Log, req Request, r Reply, before, after uint64) bool {
	t.Helper()
	pk := req.Principal.Key()
	// NB: the model names principals its own way, not by Key, so a Key
	// that merged two principals is caught.
	p := req.Principal
	key := fmt.Sprintf("%q/%q/%q/%q", p.Role, p.RunID, p.TaskID, req.CommandID)
	fp, err := fingerprint(req.Command)
	require.NoError(t, err)
	if prev, ok := m.recorded[key]; ok {
		require.Equal(t, before, after, "an id already decided for %s writes nothing", key)
		if string(prev.fp) != string(fp) {
			require.Equal(t, reusedID(), r.Rejected,
				"the same principal's id for another request is refused (%q)", key)
			require.False(t, r.Replayed)
			m.reused++
			return false
		}
		require.True(t, r.Replayed, "a retry is answered from the record (%q)", key)
		require.Equal(t, prev.reply.Rejected, r.Rejected, "a principal gets its own answer back (%q)", key)
		require.Equal(t, string(prev.reply.Result), string(r.Result),
			"a principal gets its own answer back (%q)", key)
		m.replayed++
		return false
	}
	require.False(t, r.Replayed, "a principal's new id is decided, whoever used it before (%q)", key)
	if users := m.users[req.CommandID]; len(users) > 0 {
		m.shared++
	} else {
		m.users[req.CommandID] = map[string]bool{}
	}
	m.users[req.CommandID][key] = true
	if after == before && !m.recordsEventless(p) {
		_, err := l.Outcome(pk, req.CommandID)
		require.ErrorIs(t, err, eventlog.ErrNotFound,
			"an outcome with no event past its principal's or run's bound is not recorded (%q)", key)
		m.unrecorded++
		return true // a retry of its id is decided again
	}
	m.recorded[key] = &idRecord{req: req, fp: fp, reply: r}
	m.order = append(m.order, key)
	// Every event it wrote carries its id and names its principal.
	if after > before {
		it := l.Read(before + 1)
		defer it.Close()
		for it.Next() {
			ev := it.Event()
			require.Equal(t, req.CommandID, ev.CommandID)
			require.Equal(t, pk, eventPrincipal(ev), "events of %q name its principal", key)
		}
		require.NoError(t, it.Err())
	}
	o, err := l.Outcome(pk, req.CommandID)
	require.NoError(t, err, "a decided command with an id is recorded (%q)", key)
	require.Equal(t, fp, o.Fingerprint)
	return true
}

// recordsEventless reports whether an outcome of p that wrote no event is
// recorded, and counts it when it is: under p's own bound, and, for a
// principal of a run other than its orchestrator, under the run's.
func (m *idModel) recordsEventless(p events.Principal) bool {
	pk := p.Key()
	if m.eventless[pk] >= MaxEventlessOutcomes {
		return false
	}
	if p.RunID != "" {
		if m.eventlessRuns[p.RunID] >= MaxEventlessOutcomesPerRun && p.Role != events.RoleOrchestrator {
			return false
		}
		m.eventlessRuns[p.RunID]++
	}
	m.eventless[pk]++
	return true
}

// eventPrincipal is the principal whose command wrote a record.
func eventPrincipal(ev *eventlog.Event) string {
	return events.EventPrincipal(ev.ActorRole, ev.Stream, ev.ActorTask, ev.CorrelationID).Key()
}

// appendEventPrincipal is eventPrincipal as eventlog.VerifyOptions.Principal.
func appendEventPrincipal(dst []byte, ev *eventlog.Event) []byte {
	return append(dst, eventPrincipal(ev)...)
}
