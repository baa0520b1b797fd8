package broker

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

const benchConns = 64

// BenchmarkSocketDelegate: 64 worker connections each sending delegate.request over the socket, an orchestrator
// connection settling every admitted delegation so slots free; then, in the same run, 64 goroutines doing the
// same against the in-process Engine. The store is on the real disk: every command is durable before its answer.
// Reports both rates, their ratio and the socket's p50/p99.
func BenchmarkSocketDelegate(b *testing.B) {
	cfg := projections.DefaultConfig()
	cfg.MaxSlots = 64
	// The settlers share one orchestrator credential: lift the per-credential limits and pace, which would
	// otherwise measure the policy (5,000 requests/s per credential, 64 connections) rather than the socket.
	opts := wideOpen()
	opts.RatePerCredential, opts.MaxReadsPerCredential = -1, benchConns+1
	f := newFixture(b, fixtureOpts{opts: opts, config: &cfg, disk: true})
	a := f.dial()
	a.helloAdmin()
	orchToken := a.ok("run.create", map[string]any{"runId": runR, "team": "t", "goal": "g", "cwd": "/w"})["orchestratorToken"].(string)
	o := f.dial()
	o.hello(runR, events.OrchestratorKey, orchToken)
	o.ok("run.transition", map[string]any{"to": "running"})
	workers := make([]*client, benchConns)
	for i := range workers {
		id := fmt.Sprintf("T%02d", i)
		o.ok("task.create", map[string]any{"taskId": id, "role": "explorer", "agent": "a", "title": id, "cwd": "/w/" + id, "stepId": id})
		o.ok("task.transition", map[string]any{"taskId": id, "to": "running"})
		tok := o.ok("credential.issue", map[string]any{"taskId": id})["token"].(string)
		workers[i] = f.dial()
		workers[i].hello(runR, id, tok)
	}
	// Settlers: one orchestrator connection per worker keeps the pairing simple (each settles its worker's).
	settlers := make([]*client, benchConns)
	for i := range settlers {
		settlers[i] = f.dial()
		settlers[i].hello(runR, events.OrchestratorKey, orchToken)
	}

	var socketRate, engineRate float64
	var lat []time.Duration
	b.Run("socket", func(b *testing.B) {
		lat = lat[:0]
		var mu sync.Mutex
		var next atomic.Int64
		start := time.Now()
		var wg sync.WaitGroup
		for i := 0; i < benchConns; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w, s := workers[i], settlers[i]
				var mine []time.Duration
				for next.Add(1) <= int64(b.N) {
					t0 := time.Now()
					r := w.call("delegate.request", map[string]any{"prompt": "p", "description": "d"})
					mine = append(mine, time.Since(t0))
					if r.Error != nil {
						b.Errorf("delegate.request: %v", r.Error)
						return
					}
					var res struct{ GrandchildTaskRef string }
					_ = jsonUnmarshal(r.Result, &res)
					if e := s.call("delegate.settle", map[string]any{"subId": res.GrandchildTaskRef, "outcome": "ok", "text": "t"}); e.Error != nil {
						b.Errorf("settle: %v", e.Error)
						return
					}
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}()
		}
		wg.Wait()
		socketRate = float64(b.N) / time.Since(start).Seconds()
		b.ReportMetric(socketRate, "delegations/s")
	})
	b.Run("engine", func(b *testing.B) {
		var next atomic.Int64
		start := time.Now()
		var wg sync.WaitGroup
		for i := 0; i < benchConns; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := fmt.Sprintf("T%02d", i)
				actor := events.Actor{Role: events.RoleWorker, TaskID: id}
				for next.Add(1) <= int64(b.N) {
					r, err := f.eng.Submit(context.Background(), commands.Request{Actor: actor,
						Command: &commands.DelegateRequest{RunID: runR, TaskID: id, Prompt: "p", Description: ptr("d")}})
					if err != nil || r.Rejected != nil {
						b.Errorf("engine delegate: %v %v", err, r.Rejected)
						return
					}
					var res struct{ GrandchildTaskRef string }
					_ = jsonUnmarshal(r.Result, &res)
					r, err = f.eng.Submit(context.Background(), commands.Request{Actor: events.Actor{Role: events.RoleOrchestrator},
						Command: &commands.DelegateSettle{RunID: runR, SubID: res.GrandchildTaskRef, Outcome: "ok", Text: "t"}})
					if err != nil || r.Rejected != nil {
						b.Errorf("engine settle: %v %v", err, r.Rejected)
						return
					}
				}
			}()
		}
		wg.Wait()
		engineRate = float64(b.N) / time.Since(start).Seconds()
		b.ReportMetric(engineRate, "delegations/s")
	})
	if socketRate > 0 && engineRate > 0 && len(lat) > 0 {
		slices.Sort(lat)
		p := func(q float64) time.Duration { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
		b.Logf("socket %.0f/s, engine %.0f/s, socket/engine %.2f; socket delegate.request p50 %v p99 %v (n=%d)",
			socketRate, engineRate, socketRate/engineRate, p(0.50), p(0.99), len(lat))
	}
	require.NotNil(b, f.srv)
}

func ptr[T any](v T) *T { return &v }
