package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// BenchmarkProxyVsDelegate compares a proxied call's admission
// (proxy.request) with a delegate.request's in one run, interleaved one for
// one on the same engine, so the machine's noise falls on both alike:
//
//   - engine: Submit latency of each admission through the engine on an
//     in-memory file system (decide, encode, append, apply, publish: the
//     writer's CPU, without the fsync both would share);
//   - decide: Decide alone on the same state.
//
// The metrics proxy/delegate-engine and proxy/delegate-decide are the
// ratios (below 1: the proxied call's admission is the cheaper).
//
//	go test ./commands -run '^$' -bench ProxyVsDelegate -benchtime 20000x
func BenchmarkProxyVsDelegate(b *testing.B) {
	clock := newTestClock()
	cfg := projections.DefaultConfig()
	cfg.MaxSlots, cfg.ProxyMaxRequests = 64, MaxProxyMaxRequests
	f := openEngine(b, vfs.NewMem(), clock, &cfg)
	e := f.eng
	f.seedRun("R", MaxBudgetTotal)
	nonce := SecretDigest("bench-nonce")
	job := 0
	newJob := func() {
		job++
		id := fmt.Sprintf("J%d", job)
		if job > 1 {
			f.do(&JobTransition{RunID: "R", JobID: fmt.Sprintf("J%d", job-1), To: events.JobCancelled})
		}
		f.do(&JobCreate{RunID: "R", JobID: id, TaskID: "02_exec", Tools: jobGrant, NonceDigest: nonce})
		f.do(&LeaseOpen{RunID: "R", JobID: id, Mode: events.LeaseStart, RootToolCallID: "root-" + id})
	}
	newJob()
	w := Request{Principal: events.WorkerPrincipal("R", "02_exec"), Actor: worker("02_exec")}
	submit := func(r Request, c Command) (Reply, time.Duration) {
		r.Command = c
		s := time.Now()
		rep, err := e.Submit(context.Background(), r)
		d := time.Since(s)
		require.NoError(b, err)
		require.Nil(b, rep.Rejected, "%s refused", c.Kind())
		return rep, d
	}
	var proxyT, delegateT, proxyD, delegateD time.Duration
	seen := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if seen == MaxProxyMaxRequests {
			b.StopTimer()
			newJob()
			seen = 0
			b.StartTimer()
		}
		rid := fmt.Sprintf("q%d", i)
		pr := &ProxyRequest{RunID: "R", TaskID: "02_exec", JobID: fmt.Sprintf("J%d", job), RequestID: rid,
			RequestIDChars: len(rid), NonceDigest: nonce, Tool: "read",
			Args: json.RawMessage(`{"path":"src/main.go"}`)}
		dr := &DelegateRequest{RunID: "R", TaskID: "02_exec", Prompt: "find X", BudgetTokens: ptr(int64(1000))}
		// Decide alone, on the published state, before either is submitted.
		e.Read(func(s *projections.State) {
			t := time.Now()
			_, _ = Decide(s, pr, Env{Config: s.Config(), Now: clock.Now().UnixNano(), Actor: w.Actor})
			proxyD += time.Since(t)
			t = time.Now()
			_, _ = Decide(s, dr, Env{Config: s.Config(), Now: clock.Now().UnixNano(), Actor: w.Actor,
				NewID: func() string { return "x" }})
			delegateD += time.Since(t)
		})
		// Alternate which goes first, so whatever the previous pair left
		// behind (a memtable to rotate, a scheduler hiccup) falls on both.
		var rep Reply
		var dp, dd time.Duration
		if i%2 == 0 {
			_, dp = submit(w, pr)
			rep, dd = submit(w, dr)
		} else {
			rep, dd = submit(w, dr)
			_, dp = submit(w, pr)
		}
		proxyT += dp
		delegateT += dd
		seen++
		b.StopTimer()
		// Free the call's place and the delegation's slot, unmeasured.
		submit(w, &ProxyCancel{RunID: "R", TaskID: "02_exec", JobID: pr.JobID, RequestID: rid, NonceDigest: nonce})
		var res DelegateResult
		require.NoError(b, json.Unmarshal(rep.Result, &res))
		submit(Request{Actor: orchestrator}, &DelegateSettle{RunID: "R", SubID: res.GrandchildTaskRef,
			Outcome: OutcomeOK, Text: "done"})
		b.StartTimer()
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(proxyT.Nanoseconds())/n, "proxy-engine-ns")
	b.ReportMetric(float64(delegateT.Nanoseconds())/n, "delegate-engine-ns")
	b.ReportMetric(float64(proxyT)/float64(delegateT), "proxy/delegate-engine")
	b.ReportMetric(float64(proxyD.Nanoseconds())/n, "proxy-decide-ns")
	b.ReportMetric(float64(delegateD.Nanoseconds())/n, "delegate-decide-ns")
	b.ReportMetric(float64(proxyD)/float64(delegateD), "proxy/delegate-decide")
}
