package projections

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// indexEvent is a random event of runs rA and rB among few ids, so that ids recur: admissions and every
// settlement of delegations, questions asked, answered and timed out, jobs, leases opened and cleared, calls
// requested, refused, revalidated, completed (some fenced) and cancelled, roots reset, runs ended and reopened,
// tasks retried.
func indexEvent(rng *rand.Rand) (string, string, any) {
	run := []string{"rA", "rB"}[rng.IntN(2)]
	sub := fmt.Sprintf("gc-%s-%d", run, rng.IntN(6))
	q := fmt.Sprintf("q%d", rng.IntN(6))
	job := []string{"J1", "J2"}[rng.IntN(2)]
	req := fmt.Sprintf("c%d", rng.IntN(8))
	gen := int64(rng.IntN(3))
	task := []string{"P", sub}[rng.IntN(2)]
	n := rng.IntN(30)
	switch n {
	case 0:
		return run, events.TypeRunCreated, &events.RunCreated{Team: "t", Goal: "g", Cwd: "/w", BudgetUnlimited: true}
	case 1:
		return run, events.TypeTaskCreated, &events.TaskCreated{TaskID: "P", Role: "executor", Agent: "a",
			Title: "T", Cwd: "/w"}
	case 2, 3, 4:
		return run, events.TypeDelegateAdmitted,
			&events.DelegateAdmitted{TaskID: "P", SubID: sub, ChildDepth: 2, Role: "explorer",
				Unmetered: true, TimeoutSec: 900, Deadline: rng.Int64N(1000), Cwd: "/w", Title: "d"}
	case 5:
		return run, events.TypeDelegateSpawned, &events.DelegateSpawned{TaskID: "P", SubID: sub, PID: 3}
	case 6:
		return run, events.TypeDelegateCancelRequested, &events.DelegateCancelRequested{TaskID: "P", SubID: sub}
	case 7:
		return run, events.TypeDelegateCompleted, &events.DelegateCompleted{TaskID: "P", SubID: sub, OK: true}
	case 8:
		return run, events.TypeDelegateFailed, &events.DelegateFailed{TaskID: "P", SubID: sub}
	case 9:
		return run, events.TypeDelegateTimedOut, &events.DelegateTimedOut{TaskID: "P", SubID: sub, Expired: true}
	case 10:
		return run, events.TypeDelegateCancelled, &events.DelegateCancelled{TaskID: "P", SubID: sub}
	case 11, 12:
		return run, events.TypeAskRequested, &events.AskRequested{TaskID: task, QuestionID: q,
			Question: "?", AskedAt: 1, Deadline: rng.Int64N(1000), TimeoutSec: 60}
	case 13:
		return run, events.TypeAskAnswered, &events.AskAnswered{TaskID: task, QuestionID: q}
	case 14:
		return run, events.TypeAskTimedOut, &events.AskTimedOut{TaskID: task, QuestionID: q}
	case 15:
		return run, events.TypeJobCreated, &events.JobCreated{JobID: job, TaskID: "P", Tools: []string{"read"},
			Fingerprints: []string{"f"}, Callables: []string{""}, ManifestDigest: "d"}
	case 16:
		return run, events.TypeLeaseOpened, &events.LeaseOpened{JobID: job, Generation: gen,
			RootToolCallID: fmt.Sprint("root", gen)}
	case 17:
		return run, events.TypeLeaseCleared, &events.LeaseCleared{JobID: job, Generation: gen,
			RootToolCallID: fmt.Sprint("root", gen), Saturated: rng.IntN(6) == 0}
	case 18, 19, 20:
		return run, events.TypeProxyRequested, &events.ProxyRequested{JobID: job, RequestID: req, Generation: gen,
			Tool: "read"}
	case 21:
		op := []string{events.ProxyOpRequest, events.ProxyOpRevalidate}[rng.IntN(2)]
		reason := []string{events.ProxyReasonReplay, "tool_not_granted", "x"}[rng.IntN(3)]
		return run, events.TypeProxyRejected, &events.ProxyRejected{JobID: job, RequestID: req, Generation: gen,
			Op: op, Reason: reason}
	case 22:
		return run, events.TypeManifestRevalidated, &events.ManifestRevalidated{JobID: job, RequestID: req}
	case 23:
		return run, events.TypeProxyCompleted, &events.ProxyCompleted{JobID: job, RequestID: req, Generation: gen,
			Fenced: rng.IntN(3) == 0}
	case 24:
		return run, events.TypeProxyCancelled, &events.ProxyCancelled{JobID: job, RequestID: req}
	case 25:
		return run, events.TypeJobRootsReset, &events.JobRootsReset{}
	case 26:
		return run, events.TypeRunCompleted, &events.RunCompleted{}
	case 27:
		return run, events.TypeRunRunning, &events.RunRunning{}
	case 28:
		return run, events.TypeTaskStarted, &events.TaskStarted{TaskID: task,
			Cwd: []string{"", "/w", "/v"}[rng.IntN(3)]}
	default:
		return run, events.TypeTaskRetried, &events.TaskRetried{TaskID: task}
	}
}

// checkIndexes requires each index the fold keeps beside its records to be what a walk of those records gives: a
// run's delegations in flight and pending questions, in order, a job's calls in flight (the records themselves), and
// the questions due at a few instants.
func checkIndexes(t *testing.T, s *State, where string) {
	t.Helper()
	for id, r := range s.runs {
		var wantIn []string
		for _, sub := range r.delOrder {
			if !r.dels[sub].Status.Terminal() {
				wantIn = append(wantIn, sub)
			}
		}
		require.Equal(t, wantIn, r.inFlight, "%s: run %s inFlight", where, id)
		var viaEach []string
		s.EachInFlight(id, func(d Delegation) bool { viaEach = append(viaEach, d.SubID); return true })
		require.Equal(t, wantIn, viaEach, "%s: EachInFlight", where)
		var wantAsk []string
		var askFlags pendingIndex
		for _, q := range r.askOrder {
			askFlags.appended(r.asks[q].Status == AskPending)
			if r.asks[q].Status == AskPending {
				wantAsk = append(wantAsk, q)
			}
		}
		require.Equal(t, wantAsk, r.pendingAsks, "%s: run %s pendingAsks", where, id)
		require.Equal(t, askFlags, r.askPending, "%s: run %s askPending", where, id)
		wantRunning := map[roleCwd]int{}
		for _, tk := range r.tasks {
			if tk.Status == TaskRunning {
				wantRunning[roleCwd{tk.Role, tk.Cwd}]++
			}
		}
		require.Equal(t, wantRunning, r.running, "%s: run %s running", where, id)
		for jid, j := range r.jobs {
			var want []*ProxyRequest
			for _, p := range j.Requests {
				if p.Live() {
					want = append(want, p)
				}
			}
			require.Equal(t, len(want), len(j.live), "%s: job %s live", where, jid)
			require.Equal(t, len(want), j.InFlight, "%s: job %s InFlight", where, jid)
			for i := range want {
				require.Same(t, want[i], j.live[i], "%s: job %s live[%d] not the record in Requests", where, jid, i)
			}
			if want == nil {
				require.Nil(t, j.live)
			}
		}
	}
	// DueAsks against a brute force walk at a few instants.
	for _, now := range []int64{-1, 300, 700, 2000} {
		var want []string
		runs := make([]*runState, 0, len(s.runs))
		for _, r := range s.runs {
			runs = append(runs, r)
		}
		slices.SortFunc(runs, func(a, b *runState) int { return a.ord - b.ord })
		for _, r := range runs {
			for _, q := range r.askOrder {
				if a := r.asks[q]; a.Status == AskPending && a.Deadline <= now {
					want = append(want, r.run.RunID+"/"+q)
				}
			}
		}
		var got []string
		for _, a := range s.DueAsks(now) {
			got = append(got, a.RunID+"/"+a.QuestionID)
		}
		require.Equal(t, want, got, "%s: DueAsks(%d)", where, now)
	}
}

// noSharing requires two states to share no index: a clone's fold must never change the state it was taken from.
func noSharing(t *testing.T, a, b *State) {
	t.Helper()
	for id, ra := range a.runs {
		rb := b.runs[id]
		if rb == nil {
			continue
		}
		if cap(ra.inFlight) > 0 && cap(rb.inFlight) > 0 {
			require.NotSame(t, &ra.inFlight[:1][0], &rb.inFlight[:1][0], "inFlight shared")
		}
		if cap(ra.pendingAsks) > 0 && cap(rb.pendingAsks) > 0 {
			require.NotSame(t, &ra.pendingAsks[:1][0], &rb.pendingAsks[:1][0], "pendingAsks shared")
		}
		for jid, ja := range ra.jobs {
			jb := rb.jobs[jid]
			if jb == nil {
				continue
			}
			for _, p := range ja.live {
				for _, q := range jb.live {
					require.NotSame(t, p, q, "live request shared")
				}
				for _, q := range jb.Requests {
					require.NotSame(t, p, q, "live request shared with Requests of the other copy")
				}
			}
		}
	}
}

// indexHistory is two runs and n events of indexEvent's over them.
func indexHistory(rng *rand.Rand, n int) []events.Event {
	var h history
	h.add("rA", events.TypeRunCreated, &events.RunCreated{Team: "t", Goal: "g", Cwd: "/w", BudgetUnlimited: true})
	h.add("rB", events.TypeRunCreated, &events.RunCreated{Team: "t", Goal: "g", Cwd: "/w", BudgetUnlimited: true})
	for range n {
		h.add(indexEvent(rng))
	}
	return h.evs
}

// TestDerivedIndexesMatchAWalk: the indexes a run keeps of its active records (delegations in flight, questions
// pending, a job's calls in flight) are, after every event of random histories, what a walk of all its records gives;
// after a clone (the publisher's copy), which shares none of them and whose fold leaves the original as it was;
// after a snapshot's round trip and a cold view's; and the writer's, the publisher's and a fold from scratch agree.
func TestDerivedIndexesMatchAWalk(t *testing.T) {
	for seed := range uint64(120) {
		rng := rand.New(rand.NewPCG(seed, 99))
		evs := indexHistory(rng, 100+rng.IntN(500))
		writer, pub := New(), New()
		for i, ev := range evs {
			Apply(writer, ev)
			Apply(pub, ev)
			where := fmt.Sprintf("seed %d ev %d %s", seed, i, ev.Type)
			checkIndexes(t, writer, where)
			if rng.IntN(15) == 0 {
				pub = writer.Clone()
				noSharing(t, writer, pub)
				// The clone's fold leaves the writer's state as it was.
				before, err := EncodeSnapshot(writer)
				require.NoError(t, err)
				div := pub.Clone()
				for range 20 {
					st, typ, p := indexEvent(rng)
					ev := events.Event{Stream: st, Type: typ, SchemaVersion: events.SchemaVersion(typ),
						Time: ev.Time, Payload: p}
					Apply(div, ev)
				}
				after, err := EncodeSnapshot(writer)
				require.NoError(t, err)
				require.Equal(t, before, after, "%s: writer changed by a clone's fold", where)
				checkIndexes(t, writer, where+" after diverge")
				checkIndexes(t, div, where+" div")
			}
			if rng.IntN(25) == 0 {
				b, err := EncodeSnapshot(writer)
				require.NoError(t, err)
				restored, _, err := decodeSnapshot(b)
				require.NoError(t, err)
				checkIndexes(t, restored, where+" snapshot")
				require.Equal(t, writer, restored, where+" snapshot")
				for id, r := range writer.runs {
					vb, err := encodeRunView(r)
					require.NoError(t, err)
					vr, err := decodeRunView(vb, id, r.last)
					require.NoError(t, err)
					sc := New()
					sc.runs[id] = vr
					checkIndexes(t, sc, where+" view")
					require.Equal(t, r.inFlight, vr.inFlight)
					require.Equal(t, r.pendingAsks, vr.pendingAsks)
					for jid, j := range r.jobs {
						require.Equal(t, j.live, vr.jobs[jid].live, where+" view live")
					}
				}
			}
		}
		require.Equal(t, writer, pub, "seed %d: writer and publisher", seed)
		require.Equal(t, fold(evs), writer, "seed %d: scratch", seed)
	}
}
