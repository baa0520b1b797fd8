package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// jobModelSteps is the number of random operations of the job model test;
// CREWLOG_JOB_MODEL_STEPS raises it for a soak run.
func jobModelSteps() int { return stepsFromEnv("CREWLOG_JOB_MODEL_STEPS", 3000) }

// jobModelLimits are small, so every limit is met often.
func jobModelConfig() *projections.Config {
	cfg := projections.DefaultConfig()
	cfg.ProxyMaxInFlight, cfg.ProxyMaxRequests, cfg.RevokedRootLimit, cfg.ProxyPayloadBytes = 3, 40, 3, 256
	return &cfg
}

func jobTool(name string, ro bool, desc string) map[string]any {
	t := map[string]any{
		"name": name, "label": name, "description": desc, "parameters": map[string]any{"type": "object"},
		"sourceInfo": map[string]any{"path": "/t/" + name, "source": "pi", "scope": "user", "origin": "package"},
		"callable":   "mgr:" + name,
	}
	if ro {
		t["annotations"] = map[string]any{"readOnlyHint": true}
	}
	return t
}

var (
	jobGrant, _   = json.Marshal([]any{jobTool("read", true, "read"), jobTool("write", false, "write")})
	jobChanged, _ = json.Marshal([]any{jobTool("read", true, "read"), jobTool("write", false, "write anything")})
)

// jobModel is what the log says, folded by the test itself (not by
// projections), so the invariants are checked against an independent
// reading of the events.
type jobModel struct {
	jobs      map[string]*jobModelJob // run/job
	executed  map[string]bool         // run/job/request: admitted once
	delivered map[string]bool         // run/job/request: a delivered result
	saturated map[string]bool         // run
}

type jobModelJob struct {
	status string
	active bool
	gen    int64
	root   string
}

func (m *jobModel) job(run, id string) *jobModelJob {
	k := run + "/" + id
	if m.jobs[k] == nil {
		m.jobs[k] = &jobModelJob{status: events.JobStarting}
	}
	return m.jobs[k]
}

// fold checks and folds the events at positions from+1..to.
func (m *jobModel) fold(t *testing.T, l *eventlog.Log, from, to uint64) {
	eachNewEvent(t, l, from, to, func(ev events.Event) {
		run := ev.Stream
		switch p := ev.Payload.(type) {
		case *events.LeaseOpened:
			j := m.job(run, p.JobID)
			require.False(t, j.active, "at most one active lease per job (%s/%s)", run, p.JobID)
			require.Greater(t, p.Generation, j.gen, "lease generations grow")
			j.active, j.gen, j.root = true, p.Generation, p.RootToolCallID
		case *events.LeaseCleared:
			j := m.job(run, p.JobID)
			require.True(t, j.active, "only an active lease is cleared")
			j.active = false
			if p.Saturated {
				m.saturated[run] = true
			}
		case *events.JobRootsReset:
			m.saturated[run] = false
		case *events.JobStatusChanged:
			j := m.job(run, p.JobID)
			require.Equal(t, j.status, p.From)
			if p.To != events.JobRunning {
				require.False(t, j.active, "the lease is cleared before %s shows (%s/%s)", p.To, run, p.JobID)
			} else {
				require.True(t, j.active, "running only with a lease")
			}
			j.status = p.To
		case *events.ProxyRequested:
			j := m.job(run, p.JobID)
			require.True(t, j.active && j.status == events.JobRunning && p.Generation == j.gen,
				"a proxied call is admitted only under the active lease of a running job")
			k := run + "/" + p.JobID + "/" + p.RequestID
			require.False(t, m.executed[k], "request id %s admitted twice", k)
			m.executed[k] = true
		case *events.ManifestRevalidated:
			j := m.job(run, p.JobID)
			if p.Mode == events.RevalidateCall {
				require.True(t, j.active && j.status == events.JobRunning,
					"a call executes only under the active lease of a running job")
			}
		case *events.ProxyCompleted:
			if p.Fenced {
				return
			}
			j := m.job(run, p.JobID)
			require.True(t, j.active && j.status == events.JobRunning && p.Generation == j.gen,
				"a result is delivered only under the lease that admitted its call")
			k := run + "/" + p.JobID + "/" + p.RequestID
			require.True(t, m.executed[k], "a result for a call never admitted")
			require.False(t, m.delivered[k], "a result delivered twice for %s", k)
			m.delivered[k] = true
		}
	})
}

// checkState checks the published state against the limits and T18.
func (m *jobModel) checkState(t *testing.T, s *projections.State, runs []string, cfg *projections.Config) {
	lim := cfg.JobLimits()
	for _, run := range runs {
		var walked []projections.Job
		s.EachJob(run, func(j projections.Job) bool { walked = append(walked, j); return true })
		jobs := s.Jobs(run)
		require.Len(t, walked, len(jobs))
		for i := range jobs {
			require.Equal(t, jobs[i], walked[i], "EachJob walks the jobs Jobs copies, in the same order")
		}
		if len(walked) > 1 {
			n := 0
			s.EachJob(run, func(projections.Job) bool { n++; return false })
			require.Equal(t, 1, n, "EachJob stops when fn returns false")
		}
		for _, j := range s.Jobs(run) {
			require.LessOrEqual(t, j.InFlight, lim.MaxInFlight, "in flight within the limit")
			require.LessOrEqual(t, len(j.Requests), lim.MaxRequests, "seen ids within the per-job limit")
			live := 0
			for _, q := range j.Requests {
				if q.Live() {
					live++
				}
			}
			require.Equal(t, live, j.InFlight, "in flight = live requests")
			mj := m.job(run, j.JobID)
			require.Equal(t, mj.status, j.Status)
			require.Equal(t, mj.active, j.LeaseActive)
		}
		rr := s.RevokedRootsOf(run)
		require.LessOrEqual(t, len(rr.Roots), lim.RevokedRoots, "revoked roots within the limit")
		require.Equal(t, m.saturated[run], rr.Saturated)
		if m.saturated[run] {
			for _, mj := range m.jobs {
				if mj.root != "" {
					require.False(t, authorized(t, s, run, mj.root, "read").Allowed,
						"saturated: every nested call with a parent is blocked")
				}
			}
			require.False(t, authorized(t, s, run, "anything/x", "read").Allowed,
				"saturated: every nested call with a parent is blocked")
		}
	}
}

// randomJobOp draws a manager or worker operation against what exists.
func randomJobOp(rng *rand.Rand, s *projections.State, runs []string, n int) Request {
	run := runs[rng.IntN(len(runs))]
	jobs := s.Jobs(run)
	job := fmt.Sprintf("J%d", rng.IntN(4))
	var j projections.Job
	if len(jobs) > 0 && rng.IntN(6) > 0 {
		j = jobs[len(jobs)-1] // mostly the newest (the live one)
		job = j.JobID
	}
	nonce := "nonce-" + run + "-" + job
	if rng.IntN(25) == 0 {
		nonce = "wrong"
	}
	reqID := fmt.Sprintf("q%d", n)
	if len(j.Requests) > 0 && rng.IntN(8) == 0 {
		reqID = j.Requests[rng.IntN(len(j.Requests))].RequestID // a replay, or a known one to end
	}
	// Mostly a live request for what ends one (revalidate, complete, cancel).
	endID := reqID
	var live []string
	for _, q := range j.Requests {
		if q.Live() {
			live = append(live, q.RequestID)
		}
	}
	if len(live) > 0 && rng.IntN(5) > 0 {
		endID = live[rng.IntN(len(live))]
	}
	if rng.IntN(40) == 0 {
		reqID = strings.Repeat("x", MaxRequestIDChars+1)
	}
	grant := json.RawMessage(jobGrant)
	if rng.IntN(15) == 0 {
		grant = jobChanged
	}
	orch := func(c Command) Request {
		return Request{Principal: events.OrchestratorPrincipal(run), Actor: orchestrator, Command: c}
	}
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	switch rng.IntN(24) {
	case 0:
		id := fmt.Sprintf("J%d", len(jobs)+rng.IntN(2))
		return orch(&JobCreate{RunID: run, JobID: id, TaskID: "02_exec", Tools: jobGrant,
			NonceDigest: SecretDigest("nonce-" + run + "-" + id)})
	case 1, 2:
		mode := events.LeaseContinue
		if j.Status == events.JobStarting || rng.IntN(5) == 0 {
			mode = events.LeaseStart
		}
		return orch(&LeaseOpen{RunID: run, JobID: job, Mode: mode, RootToolCallID: fmt.Sprintf("call-%d", n),
			Tools: grant})
	case 3:
		return orch(&LeaseClear{RunID: run, JobID: job, Reason: "dispose"})
	case 4:
		return orch(&JobTransition{RunID: run, JobID: job,
			To: pick(events.JobPaused, events.JobPaused, events.JobPaused, events.JobCancelled, events.JobFailed,
				events.JobCheckpointed)})
	case 5, 6:
		return orch(&ManifestRevalidate{RunID: run, JobID: job, RequestID: endID, Tools: grant})
	case 7:
		return orch(&ProxyComplete{RunID: run, JobID: job, RequestID: endID, NonceDigest: SecretDigest(nonce),
			Result: json.RawMessage(`{"content":[{"type":"text","text":"ok"}],"usage":{"in":1}}`)})
	case 8:
		if rng.IntN(3) == 0 {
			return orch(&JobRootsReset{RunID: run})
		}
		return orch(&JobDisconnect{RunID: run, JobID: job})
	case 9:
		return Request{Principal: events.WorkerPrincipal(run, "02_exec"), Actor: worker("02_exec"),
			Command: &ProxyCancel{RunID: run, TaskID: "02_exec", JobID: job, RequestID: endID,
				NonceDigest: SecretDigest(nonce)}}
	default:
		args := json.RawMessage(`{"path":"a"}`)
		if rng.IntN(6) == 0 {
			args = json.RawMessage(`{"path":"` + strings.Repeat("a", 300) + `"}`)
		}
		return Request{Principal: events.WorkerPrincipal(run, "02_exec"), Actor: worker("02_exec"),
			Command: &ProxyRequest{
				RunID: run, TaskID: "02_exec", JobID: job, RequestID: reqID, RequestIDChars: len(reqID),
				NonceDigest: SecretDigest(nonce), Tool: pick("read", "read", "write", "codemode", "bash"), Args: args,
			}}
	}
}

// TestJobModel: random interleavings of manager and worker operations
// through the engine, with crashes (a crash clone of the file system taken
// while the engine runs, then a restart on it) and the invariants of the
// dispatcher's rules checked after every step: at most one active lease per
// job; no proxied execution outside an active lease of a running job; no
// request id executed twice; in-flight and per-job counts within their
// limits; after saturation every nested call with a parent blocked until
// reset; and after every restart and at the end, the state rebuilt from the
// log equals the incremental one.
func TestJobModel(t *testing.T) {
	clock := newTestClock()
	fs := vfs.NewCrashableMem()
	cfg := jobModelConfig()
	f := openEngine(t, fs, clock, cfg)
	runs := []string{"R0", "R1"}
	for _, run := range runs {
		f.seedRun(run, 0)
	}
	m := &jobModel{jobs: map[string]*jobModelJob{}, executed: map[string]bool{}, delivered: map[string]bool{},
		saturated: map[string]bool{}}
	m.fold(t, f.log, 0, f.eng.Head())
	seed := modelSeed(t, 16)
	rng := rand.New(rand.NewPCG(seed, 20))
	// NB: the crashes draw from their own source, so the operations do not
	// depend on how much unsynced data the store holds when one happens.
	crashRNG := rand.New(rand.NewPCG(seed, 21))
	reasons := map[string]int{}
	crashes := 0
	for i := 0; i < jobModelSteps(); i++ {
		var req Request
		f.eng.Read(func(s *projections.State) { req = randomJobOp(rng, s, runs, i) })
		if rng.IntN(3) == 0 {
			req.CommandID = fmt.Sprintf("c-%d", i)
		}
		before := f.eng.Head()
		r, err := f.eng.Submit(context.Background(), req)
		require.NoError(t, err)
		if r.Rejected != nil {
			reasons[r.Rejected.Reason]++
		} else {
			reasons[req.Command.Kind()]++
		}
		m.fold(t, f.log, before, f.eng.Head())
		f.eng.Read(func(s *projections.State) { m.checkState(t, s, runs, cfg) })
		if rng.IntN(300) == 0 {
			// kill -9: what is durable is what was acknowledged.
			var live *projections.State
			f.eng.Read(func(s *projections.State) { live = whole(t, s) })
			clone := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: crashRNG})
			f.close()
			fs = clone
			f = openEngine(t, fs, clock, cfg)
			var back *projections.State
			f.eng.Read(func(s *projections.State) { back = whole(t, s) })
			require.Equal(t, live, back, "every acknowledged command survives a crash, and nothing else")
			full := projections.New()
			require.NoError(t, projections.Replay(full, f.log, 0))
			require.Equal(t, back, whole(t, full), "rebuilt from the log = incremental")
			crashes++
		}
	}
	var live *projections.State
	f.eng.Read(func(s *projections.State) { live = whole(t, s) })
	full := projections.New()
	require.NoError(t, projections.Replay(full, f.log, 0))
	require.Equal(t, live, whole(t, full), "incremental == fold from position 1")
	for _, want := range []string{
		events.ProxyReasonNonce, events.ProxyReasonReplay, events.ProxyReasonRequestLimit, events.ProxyReasonNoLease,
		events.ProxyReasonNotRunning, events.ProxyReasonNotGranted, events.ProxyReasonInFlight,
		events.ProxyReasonPayloadTooLarge, events.ProxyReasonRevalidationFailed, events.ProxyReasonBadRequestID,
		"proxy.request", "proxy.complete", "lease.open",
	} {
		require.Positive(t, reasons[want], "the model reached %s", want)
	}
	require.Positive(t, crashes)
	saturations := 0
	it := f.log.Read(1)
	for it.Next() {
		if ev, err := projections.FromLog(it.Event()); err == nil {
			if p, ok := ev.Payload.(*events.LeaseCleared); ok && p.Saturated {
				saturations++
			}
		}
	}
	require.NoError(t, it.Close())
	require.Positive(t, saturations, "the model saturated a revoked-root set")
	t.Logf("%d steps, %d crashes; outcomes %v", jobModelSteps(), crashes, reasons)
}
