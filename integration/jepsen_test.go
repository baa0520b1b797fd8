package integration

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/client"
	"github.com/crewlog/crewlog/broker/wire"
)

// A Jepsen-style check of crewd: concurrent clients over the socket record every operation (jepsen_history_test.go)
// while faults are injected, and porcupine checks the history against the sequential model of
// jepsen_model_test.go. TestJepsen is the short run of `go test ./...`; CREWLOG_JEPSEN_MINUTES makes it a long one
// (CREWLOG_JEPSEN_SEED replays a seed). TestJepsenCatchesPlantedBug proves the checker catches a crewd built to
// answer before it commits.

// faultsBuild is crewd built with the crewlog_faults tag: its engine clock can be made to jump
// (cmd/crewd/daemon/clock_faults.go), its store's disk can be made full, stalled or to fail an fsync
// (cmd/crewd/daemon/disk_faults.go).
var faultsBuild = binaryBuild{tags: "crewlog_faults"}

// plantedBuild is crewd built with the crewlog_plantedbug tag (commands/planted_on.go).
var plantedBuild = binaryBuild{tags: "crewlog_plantedbug"}

// plantedFsyncBuild is the faults build that also acknowledges appends whose fsync failed (eventlog/planted_on.go).
var plantedFsyncBuild = binaryBuild{tags: "crewlog_faults,crewlog_plantedfsync"}

// jepsenConfig is one run's shape.
type jepsenConfig struct {
	seed          uint64
	duration      time.Duration
	runs          int // crew runs, each with its orchestrator and workers
	workersPerRun int
	capacity      int           // --max-slots
	faults        []faultKind   // the kinds injected at the fault moments (none: no fault moment)
	faultEvery    time.Duration // mean time between fault moments
	aloneFirst    bool          // inject each kind once, alone, before the duration of mixed faults
	cutOneIn      int           // one attempt in cutOneIn has its connection cut mid-request (0: none)
	bin           string        // crewd binary (default: the normal build)
	planted       bool          // bin is a planted-bug build: what it acknowledged need not replay, it does not fail stop
	inDoubt       time.Duration // how long an internal answer waits for a restart before it is retried (session.inDoubt)
	epochEvery    time.Duration // how often the clients pause for a cut of the history (jepsen_epochs_test.go; 0: every second)
}

// jepsenResult is what a run did and what the checker said.
type jepsenResult struct {
	ops, cuts, lost    int
	faults             map[faultKind]int // injected by the test, by kind
	crewdInjected      map[string]int    // disk faults crewd's file system injected, by kind (enospc, fsync, stall)
	diskFull           int               // writes answered disk-full (each retried once space was back)
	failStops          int               // answers lost to an engine that failed stop (internal), retried after the restart
	selfExits          int               // times crewd exited by itself (fail stop) and was restarted
	refusedStarts      int               // restarts refused on a full disk
	closed             int               // connections the daemon closed with no kill under way
	epochs             int               // the epochs the history was cut into (jepsen_epochs_test.go)
	cutsGivenUp        int               // cuts given up: an operation stayed in flight too long
	elapsed, checkTook time.Duration
	byKind             string // how many operations of each kind
	verdicts           []verdict
	historyFile        string
}

func (r jepsenResult) allOK() bool {
	for _, v := range r.verdicts {
		if v.result != porcupine.Ok {
			return false
		}
	}
	return true
}

func (r jepsenResult) violations() []verdict {
	var v []verdict
	for _, x := range r.verdicts {
		if x.result == porcupine.Illegal {
			v = append(v, x)
		}
	}
	return v
}

// jepsenMinutes is CREWLOG_JEPSEN_MINUTES (0: the short run).
func jepsenMinutes(t *testing.T) int { return minutesFrom(t, "CREWLOG_JEPSEN_MINUTES") }

// minutesFrom is the environment variable env, a number of minutes (0 when unset).
func minutesFrom(t *testing.T, env string) int {
	s := os.Getenv(env)
	if s == "" {
		return 0
	}
	n, err := strconv.Atoi(s)
	require.NoError(t, err, env)
	return n
}

// jepsenSeed is CREWLOG_JEPSEN_SEED, or def.
func jepsenSeed(t *testing.T, def uint64) uint64 {
	s := os.Getenv("CREWLOG_JEPSEN_SEED")
	if s == "" {
		return def
	}
	n, err := strconv.ParseUint(s, 10, 64)
	require.NoError(t, err, "CREWLOG_JEPSEN_SEED")
	return n
}

// TestJepsen: 4 runs of 4 workers share an 8-slot pool; workers delegate and read their run's events, each run's
// orchestrator settles, cancels, reports usage, reads the ledger and waits on its delegations, and revokes and
// re-issues one worker's credential while that worker pings; an admin reads the slot pool. Connections are cut
// mid-request all along. At the fault moments, first one of each kind in turn, alone: crewd is killed -9, the
// engine clock jumps by minutes, the disk falls below --min-free-mib, an fsync fails, the disk stalls for a second,
// the disk fills up; then for 3 s kinds drawn at random, mixed. Answers lost so are retried with their commandIds;
// writes refused disk-full are retried once space is back. The history must be linearizable against the model,
// and every acknowledged command must replay its answer.
func TestJepsen(t *testing.T) {
	cfg := jepsenConfig{seed: jepsenSeed(t, 18), duration: 3 * time.Second, runs: 4, workersPerRun: 4, capacity: 8,
		faults: allFaults, faultEvery: 600 * time.Millisecond, aloneFirst: true, cutOneIn: 25, bin: faultsBuild.binary(t, "crewd")}
	if m := jepsenMinutes(t); m > 0 {
		cfg.duration = time.Duration(m) * time.Minute
		cfg.runs, cfg.workersPerRun = 8, 8 // 64 workers
		cfg.capacity = 16
		cfg.faultEvery = 5 * time.Second
		cfg.seed = longRunSeed(cfg.seed)
	}
	t.Logf("jepsen: seed %d (replay with CREWLOG_JEPSEN_SEED=%d)", cfg.seed, cfg.seed)
	res := runJepsen(t, cfg)
	requireClean(t, cfg, res)
	// What crewd did with the disk faults, seen from crewd and from its clients.
	require.Positive(t, res.crewdInjected["enospc"], "no write failed on the full disk")
	require.Positive(t, res.crewdInjected["fsync"], "no fsync failed")
	require.Positive(t, res.crewdInjected["stall"], "no write was stalled")
	require.Positive(t, res.diskFull, "no write was refused disk-full")
	require.Positive(t, res.selfExits, "the engine never failed stop")
	require.Positive(t, res.refusedStarts, "crewd was never refused a start on the full disk")
}

// longRunSeed is a long run's seed: CREWLOG_JEPSEN_SEED's (seed, read by jepsenSeed) when it is set, else a new one.
func longRunSeed(seed uint64) uint64 {
	if os.Getenv("CREWLOG_JEPSEN_SEED") == "" {
		return uint64(time.Now().UnixNano())
	}
	return seed
}

// requireClean requires a finished check with no violation, every kind of cfg.faults injected, and connections cut
// and answers lost and retried.
func requireClean(t *testing.T, cfg jepsenConfig, res jepsenResult) {
	require.Empty(t, res.violations(), "linearizability violations (seed %d)", cfg.seed)
	require.True(t, res.allOK(), "the check did not finish (seed %d)", cfg.seed)
	for _, kind := range cfg.faults {
		require.Positive(t, res.faults[kind], "no %s was injected", kind)
	}
	require.Positive(t, res.cuts, "no connection was cut mid-request")
	require.Positive(t, res.lost, "no answer was lost and retried")
}

// TestJepsenCatchesPlantedBug: the same short run against a crewd that answers each command before its group is
// synced and published must be flagged, with the offending sub-history and its visualisation.
func TestJepsenCatchesPlantedBug(t *testing.T) {
	cfg := jepsenConfig{seed: jepsenSeed(t, 18), duration: 3 * time.Second, runs: 4, workersPerRun: 4, capacity: 8,
		bin: plantedBuild.binary(t, "crewd"), planted: true}
	requireFlagged(t, cfg, runJepsen(t, cfg), "the planted bug")
}

// requireFlagged requires a violation with its sub-history (and porcupine's visualisation, for porcupine's models):
// the checker caught what.
func requireFlagged(t *testing.T, cfg jepsenConfig, res jepsenResult, what string) {
	bad := res.violations()
	require.NotEmpty(t, bad, "the checker missed %s (seed %d)", what, cfg.seed)
	require.NotEmpty(t, bad[0].minimal)
	if bad[0].html != "" { // NB: the refusals and slot reads are not porcupine's
		require.FileExists(t, bad[0].html)
	}
}

// TestJepsenCatchesIgnoredFsync: a crewd built to acknowledge an append whose fsync failed, and to go on, loses what
// it acknowledged since when it restarts. The short run with failing fsyncs and kills only must be flagged.
func TestJepsenCatchesIgnoredFsync(t *testing.T) {
	cfg := jepsenConfig{seed: jepsenSeed(t, 18), duration: time.Second, runs: 4, workersPerRun: 4, capacity: 8,
		faults: []faultKind{faultFsync, faultKill}, faultEvery: 300 * time.Millisecond, aloneFirst: true,
		bin: plantedFsyncBuild.binary(t, "crewd"), planted: true}
	res := runJepsen(t, cfg)
	require.Positive(t, res.crewdInjected["fsync"], "no fsync failed")
	requireFlagged(t, cfg, res, "acknowledged commands lost to an ignored fsync failure")
}

func reportJepsen(t *testing.T, cfg jepsenConfig, res jepsenResult) {
	t.Logf("jepsen: seed %d, %v, %d clients: %d operations, %d connections cut, %d answers lost and retried; "+
		"checked in %v, in %d epochs (%d cuts given up)", cfg.seed, res.elapsed.Round(time.Millisecond),
		cfg.runs*(cfg.workersPerRun+2)+1, res.ops, res.cuts, res.lost, res.checkTook.Round(time.Millisecond), res.epochs,
		res.cutsGivenUp)
	var faults []string
	for _, kind := range cfg.faults {
		faults = append(faults, fmt.Sprintf("%d %s", res.faults[kind], kind))
	}
	t.Logf("jepsen: faults: %s", strings.Join(faults, ", "))
	t.Logf("jepsen: crewd's disk injected %d ENOSPC (first per period), %d failed fsyncs, %d stalls; %d writes answered disk-full; "+
		"%d answers lost to a fail-stop; crewd failed stop and was restarted %d times, %d restarts refused on the full disk",
		res.crewdInjected["enospc"], res.crewdInjected["fsync"], res.crewdInjected["stall"], res.diskFull, res.failStops,
		res.selfExits, res.refusedStarts)
	t.Logf("jepsen: operations by kind: %s", res.byKind)
	t.Logf("jepsen: %d violations", len(res.violations()))
	for _, v := range res.verdicts {
		if v.largest > 0 {
			t.Logf("jepsen: model %s: %s (largest epoch of a partition: %d operations)", v.model, v.result, v.largest)
		} else {
			t.Logf("jepsen: model %s: %s", v.model, v.result)
		}
		if v.result == porcupine.Illegal {
			model := runModel()
			if v.model == "slots" {
				model = slotModel(cfg.capacity)
			}
			t.Logf("jepsen: %s: offending sub-history of %d operations (visualisation %s), its last %d:\n%s",
				v.model, len(v.minimal), v.html, min(len(v.minimal), 12), describe(model, lastByReturn(v.minimal, 12)))
			if v.cutShort {
				t.Logf("jepsen: %s: minimisation cut short: a check timed out, so the sub-history may be larger than needed", v.model)
			}
		}
	}
	if res.closed > 0 {
		t.Logf("jepsen: the daemon closed %d connections with no kill under way", res.closed)
	}
	if res.historyFile != "" {
		t.Logf("jepsen: history written to %s", res.historyFile)
	}
}

// jepsenNode is one crewd the clients talk to (the only one, or one of a cluster's) and its restarts.
type jepsenNode struct {
	index int
	d     *daemon
	gens  *generations
}

// jepsen is one run in progress.
type jepsen struct {
	t       *testing.T
	cfg     jepsenConfig
	nodes   []*jepsenNode // run i's clients talk to nodes[i mod len]; the slot reader to nodes[0]
	hist    *history
	stop    atomic.Bool
	stopped chan struct{} // closed with stop set
	cuts    atomic.Int64  // connections cut mid-request
	epochs  epochs        // the history's cuts: pauses of every client
	// space is open while the disk has space; diskFull counts the writes refused disk-full.
	space    *gate
	diskFull atomic.Int64

	mu         sync.Mutex
	acks       map[*daemon][]ack // acknowledged commands with a commandId, by the crewd that answered, replayed at the end
	clients    int
	clientNode []int // the node each client talks to
}

func newJepsen(t *testing.T, cfg jepsenConfig, nodes []*jepsenNode, space *gate) *jepsen {
	return &jepsen{t: t, cfg: cfg, nodes: nodes, hist: newHistory(), space: space, stopped: make(chan struct{}),
		acks: map[*daemon][]ack{}}
}

func (j *jepsen) newClient(n *jepsenNode) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.clients++
	j.clientNode = append(j.clientNode, n.index)
	return j.clients - 1
}

// lost, failStops and closed sum the nodes' counts (generations).
func (j *jepsen) lost() (lost, failStops, closed int) {
	for _, n := range j.nodes {
		lost += int(n.gens.lost.Load())
		failStops += int(n.gens.failStops.Load())
		closed += int(n.gens.closed.Load())
	}
	return lost, failStops, closed
}

// session opens a session with node n as h whose attempts are cut at random when the run cuts connections.
func (j *jepsen) session(n *jepsenNode, h client.Hello, rng *rand.Rand) *session {
	s := &session{d: n.d, gens: n.gens, as: h, failStop: true, inDoubt: j.cfg.inDoubt}
	if j.cfg.cutOneIn > 0 && rng != nil {
		var mu sync.Mutex
		s.cut = func() time.Duration {
			mu.Lock()
			defer mu.Unlock()
			if rng.IntN(j.cfg.cutOneIn) != 0 {
				return 0
			}
			j.cuts.Add(1)
			return time.Duration(1+rng.IntN(2000)) * time.Microsecond
		}
	}
	return s
}

// do sends one operation through s until it is answered, records it, and returns the output.
func (j *jepsen) do(ctx context.Context, s *session, client int, in opInput, method string, params map[string]any,
	parse func(json.RawMessage, *opOutput) error) (opOutput, error) {
	defer j.epochs.enter()()
	var (
		a        ack
		out      opOutput
		call     = j.hist.now()
		attempts = 0
	)
	for {
		var err error
		a, err = s.call(ctx, method, params)
		if err != nil {
			return opOutput{}, err
		}
		attempts += s.attempts
		out = opOutput{}
		if a.err != nil {
			out.Code = string(a.err.Code)
			out.SlotsFull = strings.Contains(a.err.Message, "nested spawn budget exhausted")
		} else if parse != nil {
			if err := parse(a.result, &out); err != nil {
				return opOutput{}, fmt.Errorf("%s: %w: %s", method, err, a.result)
			}
		}
		if out.Code == closing && isWrite(in.Kind) {
			// NB: answered close with no commandId to retry it with (session.call retries those): decided or
			// not, nobody can tell. An admission's unknown outcome could not be named (its subId is the answer).
			if in.Kind == opAdmit {
				return opOutput{}, fmt.Errorf("%s without a commandId answered close: its outcome cannot be modelled", method)
			}
			out = opOutput{Code: unknownOutcome}
			j.hist.recordUnknown(client, in, call, opMeta{Attempts: attempts, Params: params})
			return out, nil
		}
		if out.Code != diskFull {
			break
		}
		// Refused, nothing recorded: retry with the same commandId once the test has given the space back. When
		// an earlier attempt's answer was lost, that attempt may have been decided before the refusal: the
		// outcome is unknown, and the operation goes on (its interval spans every attempt) until answered.
		// Otherwise the refusal is an operation of its own, and the retry a new one.
		j.diskFull.Add(1)
		if attempts == 1 {
			j.hist.record(client, in, call, out, opMeta{Attempts: 1, Params: params, Raw: a.result})
			call, attempts = -1, 0
		}
		wasOpen, err := j.space.await(ctx)
		if err != nil {
			return opOutput{}, err
		}
		if wasOpen {
			// NB: space is back, and crewd reads the free space at most every 100 ms: pace the retries.
			select {
			case <-time.After(10 * time.Millisecond):
			case <-ctx.Done():
				return opOutput{}, ctx.Err()
			}
		}
		if call < 0 {
			call = j.hist.now()
		}
	}
	j.hist.record(client, in, call, out, opMeta{Attempts: attempts, Params: params, Raw: a.result})
	if _, ok := params["commandId"]; ok && in.Kind != opIssue && in.Kind != opRevoke {
		j.mu.Lock()
		j.acks[s.d] = append(j.acks[s.d], a)
		j.mu.Unlock()
	}
	return out, nil
}

// answer decodes an answer as T and sets the operation's output from it.
func answer[T any](set func(T, *opOutput)) func(json.RawMessage, *opOutput) error {
	return func(raw json.RawMessage, o *opOutput) error {
		var v T
		if err := json.Unmarshal(raw, &v); err != nil {
			return err
		}
		set(v, o)
		return nil
	}
}

// jepsenRun is one crew run of the test: its orchestrator, workers and the worker whose credential is revoked.
type jepsenRun struct {
	node    *jepsenNode // the crewd every client of the run talks to
	id      string
	orch    client.Hello
	workers []client.Hello
	revoked string // the task whose credential is revoked and re-issued
	subs    chan string
	// token is the revocable worker's current credential: generation and token.
	token atomic.Pointer[genToken]
}

type genToken struct {
	gen   int
	token string
	live  bool // false once revoked
}

func runJepsen(t *testing.T, cfg jepsenConfig) jepsenResult {
	// NB: also bounds the replays after the check, which takes minutes on a long history.
	ctx := testContext(t, 2*cfg.duration+10*time.Minute)
	d := newDaemon(t, "--max-slots", strconv.Itoa(cfg.capacity), "--slot-wait", "0s", "--nesting=true",
		"--quota-msg-rate", "0") // NB: the default frame size on both sides: a larger one here would close clients

	if cfg.bin != "" {
		d.bin = cfg.bin
	}
	gens := newGenerations()
	rng := rand.New(rand.NewPCG(cfg.seed, 0))
	faults := newFaultRunner(t, cfg, d, gens, rand.New(rand.NewPCG(cfg.seed, rng.Uint64())))
	t.Cleanup(d.cleanup)
	d.start()
	j := newJepsen(t, cfg, []*jepsenNode{{d: d, gens: gens}}, faults.space)
	elapsed := j.drive(ctx, rng, faults)

	ops := j.hist.snapshot()
	res := jepsenResult{ops: len(ops), cuts: int(j.cuts.Load()), elapsed: elapsed,
		faults: faults.injected, crewdInjected: diskFaultsInjected(d.log()), diskFull: int(j.diskFull.Load()),
		selfExits: faults.selfExits, refusedStarts: faults.refusedStarts}
	res.lost, res.failStops, res.closed = j.lost()
	res.byKind = countKinds(ops)
	j.check(&res, ops, slotModel(cfg.capacity))
	reportJepsen(t, cfg, res) // NB: before the replays, which may fail the test
	if !cfg.planted {
		checkReplays(ctx, t, d, j.acks[d])
		d.stop()
	}
	return res
}

// faultInjector injects a run's faults and supervises its crewds.
type faultInjector interface {
	// run injects the faults for the run's duration (errs, the clients' errors, ends it early), then lifts every
	// one and returns with every crewd answering writes.
	run(ctx context.Context, errs <-chan error)
	// supervise restarts a crewd that exits while the clients finish, until done is closed.
	supervise(done <-chan struct{})
}

// drive creates the runs (run i on node i mod len(nodes), its clients' crewd), runs every client while f injects
// the faults, stops the clients once it is done, and reads the slot pool a last time. It returns how long the
// clients ran.
func (j *jepsen) drive(ctx context.Context, rng *rand.Rand, f faultInjector) time.Duration {
	t, cfg := j.t, j.cfg
	seeds := func() *rand.Rand { return rand.New(rand.NewPCG(cfg.seed, rng.Uint64())) }
	runs := make([]*jepsenRun, cfg.runs)
	for i := range runs {
		n := j.nodes[i%len(j.nodes)]
		admin := n.d.mustDial(ctx, adminHello(n.d))
		var rc runCreated
		require.NoError(t, admin.Call(ctx, "run.create", map[string]any{"team": "team", "goal": "jepsen", "cwd": "/repo",
			"budgetTotal": 1_000_000_000}, &rc))
		c := &crew{d: n.d, runID: rc.RunID, workers: map[string]client.Hello{},
			orch: client.Hello{RunID: rc.RunID, TaskID: "orchestrator", Token: rc.OrchestratorToken}}
		orch := n.d.mustDial(ctx, c.orch)
		r := &jepsenRun{node: n, id: rc.RunID, orch: c.orch, revoked: "V", subs: make(chan string, 1<<16)}
		for w := range cfg.workersPerRun {
			r.workers = append(r.workers, c.addWorker(ctx, t, orch, fmt.Sprintf("w%d", w)))
		}
		v := c.addWorker(ctx, t, orch, r.revoked)
		r.token.Store(&genToken{token: v.Token, live: true})
		runs[i] = r
		admin.Close()
		orch.Close()
	}

	var (
		workers, others sync.WaitGroup
		errs            = make(chan error, 1024)
	)
	fail := func(err error) {
		if err != nil && !errors.Is(err, context.Canceled) {
			select {
			case errs <- err:
			default:
			}
		}
	}
	for _, r := range runs {
		for i, h := range r.workers {
			workers.Add(1)
			wr := seeds()
			go func() { defer workers.Done(); fail(j.worker(ctx, r, i, h, wr)) }()
		}
		others.Add(2)
		or := seeds()
		go func() { defer others.Done(); fail(j.orchestrator(ctx, r, or)) }()
		go func() { defer others.Done(); fail(j.pinger(ctx, r)) }()
	}
	others.Add(1)
	sr := seeds()
	reader := j.nodes[0]
	go func() { defer others.Done(); fail(j.slotReader(ctx, reader, adminHello(reader.d), sr)) }()

	began := time.Now()
	// NB: every run, single crewd or cluster, is cut: a 10-minute cluster history of 496,000 operations, checked
	// whole, held 7.8 GB in its check.
	go j.epochs.cutEvery(ctx, cmp.Or(cfg.epochEvery, time.Second), j.hist.now, j.stopped)
	f.run(ctx, errs)
	j.stop.Store(true)
	close(j.stopped)
	done := make(chan struct{})
	go func() {
		workers.Wait()
		for _, r := range runs {
			close(r.subs) // the orchestrators settle what is left, then stop
		}
		others.Wait()
		close(done)
	}()
	f.supervise(done)
	close(errs)
	for err := range errs {
		require.NoError(t, err, "seed %d", cfg.seed)
	}
	// The pool is empty once everything is settled: a last read, checked with the rest.
	require.NoError(t, j.slotRead(ctx, j.session(reader, adminHello(reader.d), nil), j.newClient(reader)))
	return time.Since(began)
}

// check checks ops against the runs model, slots (the slot model, or a cluster's version of it), the refusals and
// more, and writes the history when a check fails or the run is a long one.
func (j *jepsen) check(res *jepsenResult, ops []porcupine.Operation, slots porcupine.Model, more ...func([]porcupine.Operation) verdict) {
	dir := os.TempDir()
	cuts, given := j.epochs.made()
	res.epochs, res.cutsGivenUp = len(cuts)+1, given
	write := func() {
		res.historyFile = fmt.Sprintf("%s/crewlog-jepsen-%d.jsonl", dir, j.cfg.seed)
		require.NoError(j.t, writeHistory(res.historyFile, ops, cuts))
	}
	long := jepsenMinutes(j.t) > 0 || jepsenClusterMinutes(j.t) > 0
	if long { // NB: before the check, so that a check that does not end leaves the history to study
		write()
	}
	checked := time.Now()
	timeout := max(time.Minute, j.cfg.duration)
	res.verdicts = []verdict{
		checkHistory("runs", runModel(), freezeRun, ops, cuts, timeout, dir),
		checkHistory("slots", slots, freezeSlots, ops, cuts, timeout, dir),
		checkRefusals(ops, j.cfg.capacity),
	}
	for _, check := range more {
		res.verdicts = append(res.verdicts, check(ops))
	}
	res.checkTook = time.Since(checked)
	if !res.allOK() && !long {
		write()
	}
}

// worker delegates (each admission handed to the run's orchestrator to settle) and now and then reads its run's
// events.
func (j *jepsen) worker(ctx context.Context, r *jepsenRun, i int, h client.Hello, rng *rand.Rand) error {
	s := j.session(r.node, h, rng)
	defer s.close()
	id := j.newClient(r.node)
	for n := 0; !j.stop.Load(); n++ {
		tokens := int64(1 + rng.IntN(100))
		params := map[string]any{"prompt": "look around", "description": "explore", "budgetTokens": tokens,
			"commandId": fmt.Sprintf("%s-%d-%d", h.TaskID, i, n)}
		out, err := j.do(ctx, s, id, opInput{Kind: opAdmit, Run: r.id, Task: h.TaskID, Tokens: tokens}, "delegate.request", params,
			func(raw json.RawMessage, o *opOutput) error {
				var adm admitted
				err := json.Unmarshal(raw, &adm)
				o.Sub = adm.GrandchildTaskRef
				return err
			})
		if err != nil {
			return err
		}
		if out.ok() {
			r.subs <- out.Sub
		}
		if n%4 == 3 {
			if err := j.since(ctx, s, id, r); err != nil {
				return err
			}
		}
	}
	return nil
}

// since reads the run's first page of events: the delegations admitted and settled in it.
func (j *jepsen) since(ctx context.Context, s *session, id int, r *jepsenRun) error {
	_, err := j.do(ctx, s, id, opInput{Kind: opSince, Run: r.id}, "events.since", map[string]any{"sinceSeq": 0, "limit": 1000},
		func(raw json.RawMessage, o *opOutput) error {
			var page sincePage
			if err := json.Unmarshal(raw, &page); err != nil {
				return err
			}
			for _, ev := range page.Events {
				sub, _ := ev.Data["subId"].(string)
				switch ev.Type {
				case "delegate.admitted":
					o.Admitted = append(o.Admitted, sub)
				case "delegate.completed", "delegate.failed", "delegate.timed_out", "delegate.cancelled":
					o.Terminal = append(o.Terminal, sub)
				}
			}
			slices.Sort(o.Admitted)
			slices.Sort(o.Terminal)
			o.HasMore = page.HasMore
			return nil
		})
	return err
}

// orchestrator settles every admission of its run (some cancelled first, some waited on), and between them
// reports usage, reads the ledger, and revokes or re-issues the revocable worker's credential.
func (j *jepsen) orchestrator(ctx context.Context, r *jepsenRun, rng *rand.Rand) error {
	s := j.session(r.node, r.orch, rng)
	defer s.close()
	id := j.newClient(r.node)
	issued := 0
	var settled []string
	for n := 0; ; n++ {
		var sub string
		var open bool
		select {
		case sub, open = <-r.subs:
			if !open {
				return nil
			}
		default:
		}
		var err error
		switch {
		case sub != "":
			err = j.settle(ctx, s, id, r, sub, n, rng)
			settled = append(settled, sub)
		case n%5 == 0:
			task := fmt.Sprintf("w%d", rng.IntN(len(r.workers)))
			used := int64(rng.IntN(1000))
			_, err = j.do(ctx, s, id, opInput{Kind: opUsage, Run: r.id, Task: task, Tokens: used}, "task.usage",
				map[string]any{"taskId": task, "input": used, "output": 0, "cacheRead": 0, "cacheWrite": 0, "commandId": fmt.Sprintf("u-%d", n)},
				answer(func(u struct {
					BudgetUsed int64 `json:"budgetUsed"`
				}, o *opOutput) {
					o.BudgetUsed = u.BudgetUsed
				}))
		case n%5 == 1:
			_, err = j.do(ctx, s, id, opInput{Kind: opLedger, Run: r.id}, "query.ledger", map[string]any{"limit": 1000},
				func(raw json.RawMessage, o *opOutput) error {
					var l struct {
						Accounts []struct {
							TaskID      string `json:"taskId"`
							TokensSpent int64  `json:"tokensSpent"`
						} `json:"accounts"`
						HasMore bool `json:"hasMore"`
					}
					if err := json.Unmarshal(raw, &l); err != nil {
						return err
					}
					o.HasMore, o.SpentBy = l.HasMore, make(map[string]int64, len(l.Accounts))
					for _, a := range l.Accounts {
						o.Spent += a.TokensSpent
						o.SpentBy[a.TaskID] = a.TokensSpent
					}
					return nil
				})
		case n%5 == 2 && len(settled) > 0:
			err = j.wait(ctx, s, id, r, settled[rng.IntN(len(settled))])
		case n%5 == 3:
			if cur := r.token.Load(); cur.live {
				_, err = j.do(ctx, s, id, opInput{Kind: opRevoke, Run: r.id, Task: r.revoked}, "credential.revoke",
					map[string]any{"taskId": r.revoked, "commandId": fmt.Sprintf("rv-%d", n)}, nil)
				r.token.Store(&genToken{gen: cur.gen, token: cur.token})
			} else {
				issued++
				var tok string
				_, err = j.do(ctx, s, id, opInput{Kind: opIssue, Run: r.id, Task: r.revoked, Gen: issued}, "credential.issue",
					map[string]any{"taskId": r.revoked, "commandId": fmt.Sprintf("is-%d", n)},
					func(raw json.RawMessage, o *opOutput) error {
						var c credential
						err := json.Unmarshal(raw, &c)
						tok = c.Token
						return err
					})
				r.token.Store(&genToken{gen: issued, token: tok, live: true})
			}
		default:
			select {
			case sub, open = <-r.subs: // nothing else to do: wait for an admission
				if !open {
					return nil
				}
				err = j.settle(ctx, s, id, r, sub, n, rng)
				settled = append(settled, sub)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err != nil {
			return err
		}
	}
}

// settle settles sub with a random usage, after cancelling it one time in four and waiting on it one in three.
func (j *jepsen) settle(ctx context.Context, s *session, id int, r *jepsenRun, sub string, n int, rng *rand.Rand) error {
	if rng.IntN(4) == 0 {
		if _, err := j.do(ctx, s, id, opInput{Kind: opCancel, Run: r.id, Sub: sub}, "delegate.cancel",
			map[string]any{"subId": sub, "commandId": "c-" + sub}, nil); err != nil {
			return err
		}
	}
	if rng.IntN(3) == 0 {
		if err := j.wait(ctx, s, id, r, sub); err != nil {
			return err
		}
	}
	usage := int64(rng.IntN(200))
	_, err := j.do(ctx, s, id, opInput{Kind: opSettle, Run: r.id, Sub: sub, Tokens: usage}, "delegate.settle",
		map[string]any{"subId": sub, "outcome": "ok", "text": "done", "usageTokens": usage, "commandId": "s-" + sub},
		answer(func(res struct {
			ChargedTokens int64 `json:"chargedTokens"`
		}, o *opOutput) {
			o.Charged = res.ChargedTokens
		}))
	return err
}

// wait asks whether sub's task is completed, without waiting for it (timeoutMs 1).
func (j *jepsen) wait(ctx context.Context, s *session, id int, r *jepsenRun, sub string) error {
	_, err := j.do(ctx, s, id, opInput{Kind: opWait, Run: r.id, Sub: sub}, "task.waitStatus",
		map[string]any{"taskId": sub, "until": "completed", "timeoutMs": 1},
		answer(func(w struct {
			Status string `json:"status"`
		}, o *opOutput) {
			o.Settled = w.Status == "completed"
		}))
	return err
}

// pinger pings as the revocable worker with the credential it was last given: answered while that credential is
// current and not revoked, refused otherwise.
func (j *jepsen) pinger(ctx context.Context, r *jepsenRun) error {
	id := j.newClient(r.node)
	gens := r.node.gens
	for n := 0; !j.stop.Load(); n++ {
		if err := j.pace(ctx, n); err != nil {
			return err
		}
		leave := j.epochs.enter()
		cur := r.token.Load()
		call := j.hist.now()
		attempts := 0
		var out opOutput
		for {
			attempts++
			gen, err := gens.await(ctx, 0)
			if err != nil {
				leave()
				return err
			}
			c, err := r.node.d.dial(ctx, client.Hello{RunID: r.id, TaskID: r.revoked, Token: cur.token})
			var we *wire.Error
			if errors.As(err, &we) {
				out.Code = string(we.Code)
				break
			}
			if err != nil {
				if !gens.killedSince(gen) {
					continue // NB: a dial can time out on a loaded machine; only a restart is worth waiting for
				}
				if _, err := gens.await(ctx, gen+1); err != nil { // killed while dialing
					leave()
					return err
				}
				continue
			}
			err = c.Call(ctx, wire.MethodPing, nil, nil)
			c.Close()
			if errors.As(err, &we) {
				out.Code = string(we.Code)
				break
			}
			if err == nil {
				break
			}
			if !errors.Is(err, client.ErrClosed) {
				leave()
				return err
			}
		}
		j.hist.record(id, opInput{Kind: opPing, Run: r.id, Task: r.revoked, Gen: cur.gen}, call, out, opMeta{Attempts: attempts})
		leave()
	}
	return nil
}

// slotReader reads the daemon-wide slot pool as the admin until the run stops.
func (j *jepsen) slotReader(ctx context.Context, n *jepsenNode, h client.Hello, rng *rand.Rand) error {
	s := j.session(n, h, rng)
	defer s.close()
	id := j.newClient(n)
	for n := 0; !j.stop.Load(); n++ {
		if err := j.pace(ctx, n); err != nil {
			return err
		}
		if err := j.slotRead(ctx, s, id); err != nil {
			return err
		}
	}
	return nil
}

// readsPerWrite is how many reads a polling reader makes before it waits for the next write answered ok.
const readsPerWrite = 2

// pace makes a polling reader's n-th read wait, every readsPerWrite reads, for a write to be answered (or the run
// to stop): a fault that holds up every write would otherwise fill the history with reads of one state, and
// porcupine's check grows with them.
func (j *jepsen) pace(ctx context.Context, n int) error {
	if n%readsPerWrite != 0 || n == 0 {
		return nil
	}
	select {
	case <-j.hist.written():
	case <-j.stopped:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

func (j *jepsen) slotRead(ctx context.Context, s *session, id int) error {
	_, err := j.do(ctx, s, id, opInput{Kind: opSlots}, "query.slots", map[string]any{},
		func(raw json.RawMessage, o *opOutput) error {
			var sl struct {
				SubIDs []string `json:"subIds"`
			}
			err := json.Unmarshal(raw, &sl)
			o.Held = slices.Sorted(slices.Values(sl.SubIDs))
			return err
		})
	return err
}

// TestJepsenRecheck checks a history written by an earlier run again (CREWLOG_JEPSEN_HISTORY=path,
// CREWLOG_JEPSEN_CAPACITY its --max-slots), so a model change can be tried on a recorded failure.
func TestJepsenRecheck(t *testing.T) {
	path := os.Getenv("CREWLOG_JEPSEN_HISTORY")
	if path == "" {
		t.Skip("set CREWLOG_JEPSEN_HISTORY to a history file to check it again")
	}
	capacity, err := strconv.Atoi(os.Getenv("CREWLOG_JEPSEN_CAPACITY"))
	require.NoError(t, err, "CREWLOG_JEPSEN_CAPACITY")
	ops, cuts, err := readHistory(path)
	require.NoError(t, err)
	began := time.Now()
	res := jepsenResult{ops: len(ops), epochs: len(cuts) + 1, verdicts: []verdict{
		checkHistory("runs", runModel(), freezeRun, ops, cuts, time.Minute, os.TempDir()),
		checkHistory("slots", slotModel(capacity), freezeSlots, ops, cuts, time.Minute, os.TempDir()),
		checkRefusals(ops, capacity),
	}}
	res.checkTook = time.Since(began)
	reportJepsen(t, jepsenConfig{capacity: capacity}, res)
	require.True(t, res.allOK())
}

// lastByReturn is the n operations of ops that returned last, where a violation shows.
func lastByReturn(ops []porcupine.Operation, n int) []porcupine.Operation {
	sorted := append([]porcupine.Operation(nil), ops...)
	sortByReturn(sorted)
	return sorted[max(0, len(sorted)-n):]
}

// countKinds is how many operations of each kind ops has ("kind n, ..."), answered ok or refused.
func countKinds(ops []porcupine.Operation) string {
	n := map[opKind][2]int{}
	for _, op := range ops {
		c := n[op.Input.(opInput).Kind]
		if op.Output.(opOutput).ok() {
			c[0]++
		} else {
			c[1]++
		}
		n[op.Input.(opInput).Kind] = c
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(n)) {
		parts = append(parts, fmt.Sprintf("%s %d ok %d refused", k, n[k][0], n[k][1]))
	}
	return strings.Join(parts, ", ")
}
