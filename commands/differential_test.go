package commands

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
	"github.com/crewlog/crewlog/projections/projectionstest"
)

// differentialSteps is the number of random commands of each seed of the differential test; CREWLOG_DIFF_STEPS
// raises it for a soak run, and CREWLOG_DIFF_SEEDS adds that many seeds to the kept ones: the first from 100 on
// (from CREWLOG_MODEL_SEED on when it is set, modelSeed) that they do not hold.
func differentialSteps() int { return stepsFromEnv("CREWLOG_DIFF_STEPS", 150) }

// differentialSeeds are the seeds every run of the differential test replays: the default few, each one that found a
// mismatch, and each one that takes a path the others miss (101: a revocation closing a question, a rerouted
// settlement; differentialCoverage).
var differentialSeeds = []uint64{1, 2, 3, 101}

// differentialOptions is the engine of the differential test for a seed: ended runs go cold at once or a few
// seconds after their last event, one or two cold runs stay decoded, read back from their views or re-folded, and
// snapshots come often. Every engine opened on the seed's store takes the same; ids are minted by newID (one source
// for every engine on the store, as random ids would be), and the same clocks: the wall clock the test moves and
// steps back, and a monotonic one that only its moves forwards advance, so that the engine's time while the wall
// clock is behind it (engine_time.go) is the test's, not the host's.
func differentialOptions(seed uint64, clock *steppedClock, newID func() string) Options {
	rng := rand.New(rand.NewPCG(seed, 21))
	return Options{Clock: clock.wall.Now, hooks: &testHooks{elapsed: clock.Elapsed}, NewID: newID, ExpiryInterval: -1,
		SnapshotEvery: []int64{5, 25, 100}[rng.IntN(3)],
		Retention:     []time.Duration{-1, time.Second, 5 * time.Second, time.Minute}[rng.IntN(4)],
		ColdCache:     1 + rng.IntN(2), NoViews: rng.IntN(4) == 0}
}

// noIDs is the NewID of an engine opened only to be read.
func noIDs() string { panic("an engine opened to be read mints no id") }

// differentialWorld is what the generator knows of the runs it made.
type differentialWorld struct {
	runs     []string       // served through the socket, each with a running 02_exec at first
	imported map[string]int // imported run → imports written to it
	n        int
}

// TestDifferentialEveryStateAnswersAlike drives an engine with random valid and invalid commands across several
// runs and principals (delegations nested and settled, messages to every recipient form, questions and their ends,
// usage, imports with budget top-ups, jobs and leases, credentials, configs, run ends and reopenings) with the clock
// moving between them, now and then back, so deadlines and retention windows pass and ended runs go cold and are
// read back; the engine restarts now and then, and a follower copies what it commits. Every few steps, every way
// crewlog can hold the same history must answer every query as the live engine does: a fold of the log from
// position 1 keeping every run hot, the live state with its cold runs read back from the views the engine wrote, a
// fresh engine opened on a copy of the store (snapshot plus tail), the snapshot and the tail folded with nothing
// made cold, a rebuild from position 1 without the snapshot making ended runs cold as it goes, a fold from position
// 1 with every ended run made cold at the end, and the follower caught up.
func TestDifferentialEveryStateAnswersAlike(t *testing.T) {
	seeds := slices.Clone(differentialSeeds)
	// NB: a kept seed from 100 on (101) is not run twice: each seed added is one the kept ones do not hold.
	more, from := stepsFromEnv("CREWLOG_DIFF_SEEDS", 0), uint64(100)
	if more > 0 {
		from = modelSeed(t, from)
	}
	for s := from; more > 0; s++ {
		if !slices.Contains(seeds, s) {
			seeds = append(seeds, s)
			more--
		}
	}
	coldChecks, covered, completed := 0, map[string]int{}, 0
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			n, paths := differential(t, seed, differentialSteps())
			coldChecks += n
			for path, k := range paths {
				covered[path] += k
			}
			completed++
		})
	}
	// NB: what follows is asked of the seeds together, so it is asked only when every seed ran to its end: a -run
	// (or -skip) pattern naming some seeds runs only those (t.Run returns true for the others without calling
	// them), and a seed that failed stopped before counting its paths; either would fail here with no path missed.
	if completed < len(seeds) {
		t.Logf("cold comparisons and paths taken not checked: %d of %d seeds ran to their end", completed, len(seeds))
		return
	}
	// NB: the comparisons of cold runs read back compare nothing while no run is cold.
	require.Positive(t, coldChecks, "no comparison met a cold run")
	for _, path := range []string{pathRevokeClosesQuestion, pathRerouted, pathImportedShadow, pathWorkerShare} {
		require.Positive(t, covered[path], "no seed took %s", path)
	}
}

// differential drives one seed and returns how many of its comparisons met a cold run, and the paths its log took.
func differential(t *testing.T, seed uint64, steps int) (coldChecks int, covered map[string]int) {
	clock := &steppedClock{wall: newTestClock()}
	fs := vfs.NewCrashableMem()
	ids := &idCounter{}
	newID := ids.next
	// stepped: the clock stepped back and has not passed high, the latest it read before, since. No decision is drawn
	// for a copy then (the seeds' histories were drawn so); differentialDecisions compares them only when a fresh
	// engine's time is the live one's, which takes longer still (sixteen times the step).
	stepped, high := false, clock.wall.Now()
	// A follower copies every group the engine commits to its own log, and catches up on it.
	copyLog, err := eventlog.Open("copy", &eventlog.Options{FS: vfs.NewMem()})
	require.NoError(t, err)
	defer copyLog.Close()
	follower, err := Open(copyLog, differentialOptions(seed, clock, noIDs))
	require.NoError(t, err)
	defer follower.Close()
	committer := &copyingCommitter{copy: copyLog}
	open := func(fs vfs.FS) *engineFixture {
		l, err := eventlog.Open("db", &eventlog.Options{FS: copyingFS(fs)})
		require.NoError(t, err)
		committer.own = l
		o := differentialOptions(seed, clock, newID)
		o.Committer = committer
		e, err := Open(l, o)
		require.NoError(t, err)
		return &engineFixture{t: t, fs: fs, log: l, eng: e, clock: clock.wall}
	}
	f := open(fs)
	defer func() { f.close() }()
	w := &differentialWorld{imported: map[string]int{}}
	for i := 0; i < 3; i++ {
		w.runs = append(w.runs, fmt.Sprintf("R%d", i))
		f.seedRun(w.runs[i], int64(i%2)*50000)
	}
	rng := rand.New(rand.NewPCG(seed, 20))
	every := []int{1, 5, 10}[seed%3] // some seeds compare after every step: a difference may last one step only
	if seed < 100 && every == 1 {
		every = 3 // kept seeds: the default run stays within seconds
	}
	outcomes := map[string]int{}
	for i := 0; i < steps; i++ {
		var req Request
		f.eng.Read(func(s *projections.State) { req = w.command(rng, s) })
		if req.Command == nil { // a new run, seeded as the others
			run := fmt.Sprintf("R%d", len(w.runs))
			w.runs = append(w.runs, run)
			f.seedRun(run, int64(rng.IntN(3))*20000)
		} else {
			if req.CommandID == "" && rng.IntN(3) == 0 {
				req.CommandID = fmt.Sprintf("d-%d", i)
			}
			r, err := f.eng.Submit(context.Background(), req)
			require.NoError(t, err, "step %d", i)
			if r.Rejected != nil {
				outcomes[req.Command.Kind()+"/"+r.Rejected.Reason]++
			} else {
				outcomes[req.Command.Kind()]++
			}
		}
		// The clock moves on between commands: mostly little, now and then past a retention or a deadline, and
		// now and then it steps back (within the engine's hold, or further).
		switch rng.IntN(20) {
		case 19:
			if rng.IntN(10) == 0 {
				clock.step(-time.Duration(rng.IntN(7200)) * time.Second)
				stepped = true
			}
		case 0:
			clock.pass(time.Duration(rng.IntN(200)) * time.Second)
		case 1, 2, 3:
			clock.pass(time.Duration(rng.IntN(10)) * time.Second)
		default:
			clock.pass(time.Duration(rng.IntN(1000)) * time.Millisecond)
		}
		if now := clock.wall.Now(); now.After(high) {
			high, stepped = now, false
		}
		f.eng.Tick(context.Background())
		switch rng.IntN(40) {
		case 0:
			f.eng.saveSnapshot()
		case 1:
			if rng.IntN(4) == 0 { // a restart of the engine on its own store
				f.close()
				f = open(fs)
			}
		}
		if i%every == every-1 || i == steps-1 {
			what := fmt.Sprintf("seed %d step %d", seed, i)
			differentialCheck(t, f, clock, seed, what)
			f.eng.Read(func(s *projections.State) {
				if s.ColdRuns() > 0 {
					coldChecks++
				}
			})
			if !stepped {
				differentialDecisions(t, f, clock, seed, ids, what, func() Request {
					var req Request
					for req.Command == nil {
						f.eng.Read(func(s *projections.State) { req = w.command(rng, s) })
					}
					return req
				})
			}
			require.NoError(t, follower.CatchUp(context.Background()))
			now := clock.wall.Now().UnixMilli()
			var live map[string]any
			f.eng.Read(func(s *projections.State) { live = projectionstest.Answers(t, s, now) })
			follower.Read(func(s *projections.State) {
				projectionstest.RequireSame(t, live, projectionstest.Answers(t, s, now),
					what+": a follower caught up")
			})
		}
	}
	f.eng.Read(func(s *projections.State) {
		t.Logf("seed %d: %d steps, position %d, %d cold runs, %d hot; outcomes %v", seed, steps, s.Position,
			s.ColdRuns(), s.HotRuns(), outcomes)
	})
	covered = differentialCoverage(t, f.log)
	return coldChecks, covered
}

// Paths of the log the differential test must take on its kept seeds (differentialCoverage).
const (
	pathRevokeClosesQuestion = "a revocation closing its task's question"
	pathRerouted             = "a settlement rerouted to the run inbox"
	pathImportedShadow       = "an imported shadow task without a stepId"
	pathWorkerShare          = "a worker refused at its share of the events or bytes quota"
)

// differentialCoverage counts the paths of the log l took: a credential.revoked, the ask.timedout (asker-ended) of
// its task's question and the task.resumed that follow it in its group; a delegation's result rerouted to the run
// inbox; a shadow task an import created with no stepId; a worker's refusal at its share of the events or bytes
// quota.
func differentialCoverage(t *testing.T, l *eventlog.Log) map[string]int {
	t.Helper()
	covered := map[string]int{}
	it := l.Read(1)
	defer it.Close()
	var last [3]events.Event
	for it.Next() {
		ev, err := projections.FromLog(it.Event())
		require.NoError(t, err)
		last = [3]events.Event{last[1], last[2], ev}
		switch p := ev.Payload.(type) {
		case *events.TaskResumed:
			revoked := events.PayloadAs[events.CredentialRevoked](last[0])
			ended := events.PayloadAs[events.AskTimedOut](last[1])
			if revoked != nil && ended != nil && ended.Reason == events.AskReasonAskerEnded &&
				revoked.TaskID == p.TaskID && ended.TaskID == p.TaskID && ended.QuestionID == p.QuestionID &&
				last[0].Time == ev.Time && last[0].CommandID == ev.CommandID {
				covered[pathRevokeClosesQuestion]++
			}
		case *events.MailboxAppended:
			if p.Rerouted {
				covered[pathRerouted]++
			}
		case *events.TaskCreated:
			if p.Kind == events.TaskKindShadow && p.StepID == "" { // only an import writes one
				covered[pathImportedShadow]++
			}
		case *events.RunQuotaExceeded:
			if p.Quota == events.QuotaWorkerEvents || p.Quota == events.QuotaWorkerBytes {
				covered[pathWorkerShare]++
			}
		}
	}
	require.NoError(t, it.Err())
	return covered
}

// differentialCheck compares every state that holds f's history with the live one, by their answers.
func differentialCheck(t *testing.T, f *engineFixture, clock *steppedClock, seed uint64, what string) {
	t.Helper()
	now := f.clock.Now().UnixMilli()
	var live map[string]any
	var liveWhole *projections.State
	f.eng.Read(func(s *projections.State) { live, liveWhole = projectionstest.Answers(t, s, now), whole(t, s) })
	full := projections.New()
	require.NoError(t, projections.Replay(full, f.log, 0))
	projectionstest.RequireSame(t, live, projectionstest.Answers(t, full, now), what+": fold from position 1")
	require.Equal(t, liveWhole, whole(t, full), "%s: fold from position 1", what)

	views := f.viewsWritten()
	views.SetColdStore(projections.NewColdStore(f.log, 0))
	projectionstest.RequireSame(t, live, projectionstest.Answers(t, views, now), what+": cold runs read from "+
		"their views")

	// A copy of the store: a fresh engine on it (its snapshot and the tail), and folds of it from position 1.
	fs := f.fs.(*vfs.MemFS).CrashClone(vfs.CrashCloneCfg{})
	l, err := eventlog.Open("db", &eventlog.Options{FS: copyingFS(fs)})
	require.NoError(t, err)
	defer l.Close()
	func() {
		e, err := Open(l, differentialOptions(seed, clock, noIDs))
		require.NoError(t, err)
		defer e.Close()
		if err := e.LoadInfo().SnapshotError; err != nil {
			require.ErrorIs(t, err, eventlog.ErrNotFound, "%s: the snapshot the engine saved is read back", what)
		}
		e.Read(func(s *projections.State) {
			projectionstest.RequireSame(t, live, projectionstest.Answers(t, s, now),
				what+": an engine opened on a copy")
			require.Equal(t, liveWhole, whole(t, s), "%s: an engine opened on a copy", what)
		})
	}()
	loaded, _, err := projections.Load(l)
	require.NoError(t, err)
	projectionstest.RequireSame(t, live, projectionstest.Answers(t, loaded, now), what+": the snapshot and the "+
		"tail, nothing made cold")
	rebuilt, _, err := projections.LoadTiered(l,
		projections.Tiering{NoSnapshot: true, Retention: 0, Now: now, Cache: 1,
			SaveViews: true, Index: true})
	require.NoError(t, err)
	projectionstest.RequireSame(t, live, projectionstest.Answers(t, rebuilt, now),
		what+": rebuilt from position 1, ended runs cold")
	refolded, _, err := projections.LoadTiered(l, projections.Tiering{NoSnapshot: true, Retention: -1, Cache: 1})
	require.NoError(t, err)
	refolded.SetColdStore(projections.NewColdStore(l, 1))
	refolded.EvictAll(now, 0, 0)
	projectionstest.RequireSame(t, live, projectionstest.Answers(t, refolded, now),
		what+": every ended run made cold")
}

// command draws the next request against what s holds; a nil Command asks for a new run.
func (w *differentialWorld) command(rng *rand.Rand, s *projections.State) Request {
	w.n++
	// Mostly a run that has not ended, and a running task of it.
	run := w.runs[rng.IntN(len(w.runs))]
	for k := 0; k < 3; k++ {
		if st, ok := s.RunStatus(run); !ok || !st.Stale() {
			break
		}
		run = w.runs[rng.IntN(len(w.runs))]
	}
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	tasks := s.Tasks(run)
	task := "02_exec"
	for _, t := range tasks {
		if t.Status == projections.TaskRunning && rng.IntN(2) == 0 {
			task = t.TaskID
		}
	}
	if len(tasks) > 0 && rng.IntN(5) == 0 {
		task = tasks[rng.IntN(len(tasks))].TaskID
	}
	orch := func(c Command) Request {
		return Request{Principal: events.OrchestratorPrincipal(run), Actor: orchestrator, Command: c}
	}
	work := func(c Command) Request {
		return Request{Principal: events.WorkerPrincipal(run, task), Actor: worker(task), Command: c}
	}
	adm := func(c Command) Request { return Request{Principal: events.AdminPrincipal(), Actor: admin, Command: c} }
	recipients := func() []string {
		var to []string
		for k := 1 + rng.IntN(3); k > 0; k-- {
			switch rng.IntN(12) {
			case 0, 1:
				to = append(to, ToAll)
			case 2, 3:
				to = append(to, ToParent)
			case 4, 5:
				to = append(to, ToGroup)
			case 6:
				to = append(to, "nobody")
			default:
				to = append(to, task)
			}
		}
		return to
	}
	switch rng.IntN(48) {
	case 44, 45:
		// A config of small limits: quotas, fair shares and waits for a slot, nested budgets, job limits.
		cfg := projections.DefaultConfig()
		cfg.MaxSlots, cfg.SlotShare, cfg.SlotWaitSec = 1+rng.IntN(4), rng.IntN(3), rng.IntN(30)
		cfg.WorkerSlotShare = cfg.SlotWaitSec%3 != 0 // NB: as quotaWorkerShare, the draw of another knob
		cfg.SettleGraceSec = rng.IntN(10)
		cfg.WaitMethodsEnabled = rng.IntN(2) == 0
		cfg.BudgetMode = pick(events.BudgetModePicrew, events.BudgetModeNested)
		if rng.IntN(2) == 0 {
			cfg.QuotaEvents, cfg.QuotaBytes, cfg.QuotaMsgsPerMin = int64(20+rng.IntN(200)),
				int64(2000+rng.IntN(50000)), rng.IntN(8)
			cfg.QuotaReserve = rng.IntN(50)
			cfg.QuotaWorkerMsgShare = rng.IntN(101)
			// NB: the message share's draw, not one of its own: another draw would change every kept seed's history.
			cfg.QuotaWorkerShare = cfg.QuotaWorkerMsgShare
			cfg.ShareByDelegator = cfg.QuotaWorkerMsgShare%2 == 0
		}
		if rng.IntN(2) == 0 {
			cfg.ProxyMaxInFlight, cfg.ProxyMaxRequests, cfg.RevokedRootLimit, cfg.ProxyPayloadBytes = 1+rng.IntN(3),
				2+rng.IntN(20), 1+rng.IntN(3), 256
		}
		return adm(&Configure{Config: cfg})
	case 46:
		if len(w.runs) >= 16 {
			return orch(&QuotaRecheck{RunID: run})
		}
		run = fmt.Sprintf("R%d", len(w.runs))
		w.runs = append(w.runs, run)
		c := &RunCreate{RunID: run, Team: "t", Goal: "g", Cwd: "/w", BudgetUnlimited: rng.IntN(4) == 0,
			OrchestratorDigest: pick("", fmt.Sprintf("%064x", w.n))}
		if !c.BudgetUnlimited && rng.IntN(3) > 0 {
			c.BudgetTotal, c.BudgetWarning, c.BudgetAbort = ptr(int64(1000+rng.IntN(20000))), ptr(0.5), ptr(0.9)
		}
		return adm(c)
	case 47:
		return orch(&RunTransition{RunID: run, To: pick("queued", "planning", "running", "blocked")})
	case 0, 1, 2, 3, 4, 5, 6, 7, 8, 9:
		return randomCommand(rng, s, w.runs)
	case 10, 11, 12, 13, 14:
		if len(s.Jobs(run)) == 0 || rng.IntN(8) == 0 {
			id := fmt.Sprintf("J%d", len(s.Jobs(run))+rng.IntN(2))
			return orch(&JobCreate{RunID: run, JobID: id, TaskID: pick("02_exec", "02_exec", task), Tools: jobGrant,
				NonceDigest: SecretDigest("nonce-" + run + "-" + id)})
		}
		return randomJobOp(rng, s, w.runs, w.n)
	case 15, 16, 17:
		return orch(&MessageSend{RunID: run, To: recipients(), Body: fmt.Sprintf("m%d", w.n),
			MessageKind: pick("", events.KindMessage, events.KindNotify, events.KindSteer, events.KindResponse),
			Priority:    pick("", "normal", "urgent", "low")})
	case 18, 19:
		return work(&MessageSend{RunID: run, FromTask: task, To: recipients(), Body: fmt.Sprintf("w%d", w.n),
			MessageKind: pick("", events.KindMessage, events.KindNotify)})
	case 20, 21:
		box := pick(task, events.RunInbox, "nobody")
		page, _ := s.Mailbox(run, box, projections.MailboxFilter{Pending: rng.IntN(2) == 0, Limit: 3})
		var ids []string
		for _, m := range page.Messages {
			if rng.IntN(3) > 0 {
				ids = append(ids, m.ID)
			}
		}
		if len(ids) == 0 || rng.IntN(8) == 0 {
			ids = append(ids, "m-nope")
		}
		if rng.IntN(2) == 0 {
			return orch(&MailboxDeliver{RunID: run, Recipient: box, MessageIDs: ids})
		}
		return orch(&MailboxAck{RunID: run, Recipient: box, MessageIDs: ids})
	case 22, 23:
		var timeout *float64
		if rng.IntN(4) > 0 {
			timeout = ptr(float64(1 + rng.IntN(30)))
		}
		return work(&WaitRequest{RunID: run, TaskID: task, Question: "q?", Options: [][]string{nil, {"a"}, {"a",
			"b"}}[rng.IntN(3)],
			TimeoutSec: timeout})
	case 24, 25:
		qid := "q-nope"
		if asks := s.Asks(run); len(asks) > 0 {
			a := asks[rng.IntN(len(asks))]
			qid, task = a.QuestionID, a.TaskID
		}
		switch rng.IntN(3) {
		case 0:
			return orch(&MessageSend{RunID: run, To: []string{task}, Body: "answer", MessageKind: events.KindResponse,
				QuestionID: qid})
		case 1:
			return orch(&AskExpire{RunID: run, QuestionID: qid})
		}
		return orch(&WaitResolve{RunID: run, TaskID: task, QuestionID: qid})
	case 26, 27:
		return work(&TaskUsage{RunID: run, TaskID: task, Input: int64(rng.IntN(5000)), Output: int64(rng.IntN(500)),
			CacheRead: int64(rng.IntN(3)), Cost: float64(rng.IntN(3)) / 4, Turns: int64(rng.IntN(2))})
	case 28:
		// Mostly a task parked on a question, whose revocation closes it (asker-ended) and resumes the task.
		key := pick(task, task, events.OrchestratorKey)
		for _, a := range s.Asks(run) {
			if a.Status == projections.AskPending && rng.IntN(3) > 0 {
				key = a.TaskID
			}
		}
		return adm(&CredentialIssue{RunID: run, TaskID: key, Digest: fmt.Sprintf("%064x", w.n)})
	case 29:
		if rng.IntN(3) == 0 { // a late revocation of an ended (cold, mostly) run's task
			run = w.runs[rng.IntN(len(w.runs))]
		}
		key := pick(task, events.OrchestratorKey, "nope")
		for _, c := range s.Credentials(run) {
			if !c.Revoked && rng.IntN(4) > 0 {
				key = c.Key
			}
		}
		for _, a := range s.Asks(run) { // mostly a task parked on a question, when one holds a credential
			if c, ok := s.Credential(run, a.TaskID); ok && !c.Revoked && a.Status == projections.AskPending &&
				rng.IntN(4) > 0 {
				key = a.TaskID
			}
		}
		return adm(&CredentialRevoke{RunID: run, TaskID: key, Reason: "gone"})
	case 30, 31:
		return orch(&RunTransition{RunID: run, To: pick("completed", "completed", "failed", "cancelled", "blocked"),
			Summary: "s"})
	case 32, 33:
		// A run that ended (cold, mostly) comes back, and its main task with it.
		run = w.runs[rng.IntN(len(w.runs))]
		if st, ok := s.RunStatus(run); ok && st.Stale() && rng.IntN(2) == 0 {
			return orch(&RunTransition{RunID: run, To: "running"})
		}
		return orch(&TaskTransition{RunID: run, TaskID: "02_exec", To: "running"})
	case 34:
		if len(w.runs) < 16 {
			return Request{}
		}
		return orch(&RunTransition{RunID: run, To: "running"})
	case 35, 36, 37:
		return w.importCommand(rng, s)
	case 38:
		return orch(&SteerPush{RunID: run, TaskID: task, Body: "steer", Priority: pick("", "urgent", "normal")})
	case 39:
		return work(&Escalate{RunID: run, FromTask: task, To: pick(ToParent, "orchestrator", task), Body: "help"})
	case 40:
		for _, t := range tasks {
			if t.Status == projections.TaskQueued && rng.IntN(3) > 0 {
				return orch(&TaskTransition{RunID: run, TaskID: t.TaskID, To: "running"})
			}
		}
		return orch(&TaskTransition{RunID: run, TaskID: task, To: pick("running", "completed", "failed",
			"cancelled", "waiting", "queued")})
	case 41:
		return orch(&TaskCreate{RunID: run, TaskID: fmt.Sprintf("t%d", rng.IntN(12)), Role: pick("executor",
			"explorer"),
			Agent: "a", Title: "t", Cwd: pick("/w", "/w2"), StepID: "s",
			DependsOn: []string{"02_exec"}[:rng.IntN(2)]})
	default:
		return work(&DelegateRequest{RunID: run, TaskID: task, Prompt: "p", BudgetTokens: ptr(int64(rng.IntN(3000)))})
	}
}

// importCommand draws an import: a new run, or events of one imported before (its tasks, usage, delegations and
// their ends, budget top-ups, messages, questions, its end), at times the source chose (some in the past, some
// ahead of the engine clock), as the engine principal.
func (w *differentialWorld) importCommand(rng *rand.Rand, s *projections.State) Request {
	names := []string{"I0", "I1", "I2"}
	run := names[rng.IntN(len(names))]
	n := w.imported[run]
	w.imported[run]++
	at := func() int64 {
		now := time.Unix(0, 0).Add(time.Duration(s.Position)).UnixMilli() // nonzero, unrelated to the clock
		switch rng.IntN(4) {
		case 0:
			return 0 // the engine clock
		case 1:
			return 1_000 + now
		}
		return time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC).UnixMilli() + int64(rng.IntN(4_000_000))
	}
	ev := func(typ string, p any) ImportedEvent { return ImportedEvent{Type: typ, TimeMs: at(), Payload: p} }
	task := fmt.Sprintf("T%d", rng.IntN(3))
	sub := fmt.Sprintf("ig-%s-%d", run, rng.IntN(6))
	if rng.IntN(5) == 0 { // the events of a shadow task (created by an import, or by its delegation's admission)
		task = sub
	}
	var evs []ImportedEvent
	if _, ok := s.Run(run); !ok || rng.IntN(30) == 0 {
		evs = append(evs, ev(events.TypeRunCreated, &events.RunCreated{Team: "t", Goal: "g", Cwd: "/w",
			BudgetTotal: optBudget(int64(rng.IntN(2)) * 40000)}))
	}
	for k := 1 + rng.IntN(3); k > 0; k-- {
		switch rng.IntN(14) {
		case 0:
			evs = append(evs, ev(events.TypeTaskCreated,
				&events.TaskCreated{TaskID: task, Role: "executor", Agent: "a",
					Title: "x", Cwd: "/w", StepID: "s", Kind: events.TaskKindWorkflow}))
		case 1:
			evs = append(evs, ev(events.TypeTaskStarted, &events.TaskStarted{TaskID: task}))
		case 2:
			evs = append(evs, ev(events.TypeTaskUsage,
				&events.TaskUsage{TaskID: task, Input: int64(rng.IntN(900)), Turns: 1}))
		case 3:
			evs = append(evs, ev(events.TypeDelegateAdmitted,
				&events.DelegateAdmitted{TaskID: task, SubID: sub, ChildDepth: 2,
					Role: "explorer", Unmetered: rng.IntN(2) == 0, ReservedTokens: int64(rng.IntN(2)) * 300,
					TimeoutSec: float64(rng.IntN(120)), Prompt: "p", Cwd: "/w", Title: "t"}))
		case 4:
			evs = append(evs, ev(events.TypeDelegateCompleted,
				&events.DelegateCompleted{TaskID: task, SubID: sub, OK: rng.IntN(2) == 0}))
		case 5:
			evs = append(evs, ev(events.TypeBudgetReserved,
				&events.BudgetReserved{TaskID: task, SubID: events.ImportTopUpSubID,
					Tokens: int64(rng.IntN(2000)), GrantedTokens: 5000}))
		case 6:
			evs = append(evs, ev(events.TypeBudgetReserved, &events.BudgetReserved{TaskID: task, SubID: sub,
				Tokens: int64(rng.IntN(500)), GrantedTokens: 5000}))
		case 7:
			evs = append(evs, ev(events.TypeBudgetCharged, &events.BudgetCharged{TaskID: task, SubID: sub,
				Tokens: int64(rng.IntN(500)), UsageTokens: int64(rng.IntN(500)), ReservedTokens: 300}))
		case 8:
			evs = append(evs, ev(events.TypeMailboxAppended, &events.MailboxAppended{ID: fmt.Sprintf("im-%d", w.n),
				To: []string{task, events.RunInbox}[rng.IntN(2)], From: "orchestrator", Kind: events.KindMessage,
				Priority: "normal", DeliveryMode: "queued", Body: "b"}))
		case 9:
			q := fmt.Sprintf("iq-%d", rng.IntN(4))
			evs = append(evs, ev(events.TypeAskRequested,
				&events.AskRequested{TaskID: task, QuestionID: q, Question: "?",
					TimeoutSec: int64(rng.IntN(60)), Deadline: at() + int64(rng.IntN(60_000))}))
		case 10:
			evs = append(evs, ev(events.TypeAskAnswered,
				&events.AskAnswered{TaskID: task, QuestionID: fmt.Sprintf("iq-%d", rng.IntN(4))}))
		case 11:
			evs = append(evs, ev(events.TypeRunCompleted, &events.RunCompleted{Summary: "done"}))
		case 12:
			// A shadow task whose delegate events were lost: no stepId; its delegation may be admitted later.
			evs = append(evs, ev(events.TypeTaskCreated, &events.TaskCreated{TaskID: sub, Role: "explorer",
				Agent: "a", Title: "x", Cwd: "/w", Kind: events.TaskKindShadow}))
		default:
			evs = append(evs, ev(events.TypeRunRunning, &events.RunRunning{}))
		}
	}
	return Request{Principal: events.EnginePrincipal(), CommandID: fmt.Sprintf("import:%s:%d", run, n), Actor: admin,
		Command: &Import{Source: events.ForeignSourcePicrew, RunID: run, Events: evs}}
}

// differentialDecisions submits the next few commands to the live engine and to a fresh engine opened on a copy of
// its store (snapshot plus tail, other runs cold), both minting the same ids: each must decide alike, to the byte,
// when both engines decide by the same time. NB: they need not while the wall clock is behind the live engine's
// time: the live engine goes on from the latest time it handed out, the fresh one from its log's last event
// (engine_time.go), so both decide, and are compared only when the fresh engine's time is the live one's.
func differentialDecisions(t *testing.T, f *engineFixture, clock *steppedClock, seed uint64, ids *idCounter,
	what string, next func() Request) {
	t.Helper()
	l, err := eventlog.Open("db", &eventlog.Options{FS: copyingFS(f.fs.(*vfs.MemFS).CrashClone(vfs.CrashCloneCfg{}))})
	require.NoError(t, err)
	defer l.Close()
	copied := &idCounter{}
	copied.n.Store(ids.n.Load())
	e, err := Open(l, differentialOptions(seed, clock, copied.next))
	require.NoError(t, err)
	defer e.Close()
	same := f.eng.times.peek().Equal(e.times.peek())
	from := f.eng.Head() + 1
	for k := 0; k < 3; k++ {
		req := next()
		want, err := f.eng.Submit(context.Background(), req)
		require.NoError(t, err)
		got, err := e.Submit(context.Background(), req)
		require.NoError(t, err)
		if !same {
			continue
		}
		require.Equal(t, string(want.Result), string(got.Result), "%s: %s decided on a copy", what,
			req.Command.Kind())
		require.Equal(t, want.Rejected, got.Rejected, "%s: %s decided on a copy", what, req.Command.Kind())
		require.Equal(t, want.Position, got.Position, "%s: %s decided on a copy", what, req.Command.Kind())
		require.Equal(t, want.Replayed, got.Replayed, "%s: %s decided on a copy", what, req.Command.Kind())
	}
	if !same {
		return
	}
	require.Equal(t, f.eng.Head(), e.Head(), what)
	a, b := f.log.Read(from), l.Read(from)
	defer a.Close()
	defer b.Close()
	for a.Next() {
		require.True(t, b.Next(), what)
		require.Equal(t, *a.Event(), *b.Event(), "%s: the events the copy wrote", what)
	}
	require.False(t, b.Next(), what)
	require.NoError(t, a.Err())
	require.NoError(t, b.Err())
}
