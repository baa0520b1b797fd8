package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/client"
	"github.com/crewlog/crewlog/broker/wire"
)

// The hostile-mix soak (docs/benchmarks.md, "Hostile mix"). Off by default:
//
//	CREWLOG_SOAK=1 CREWLOG_SOAK_DURATION=2m go test ./integration -run TestSoakHostileMix -v -timeout 0
//
// CREWLOG_SOAK_DURATION defaults to 30m. The run alternates windows of the honest crew alone and of the honest
// crew next to the hostile clients, so the machine's drift hits both alike, and compares them within this run.

// Budgets of the soak's crewd, from which its RSS bound is derived.
const (
	soakMaxConns       = 1024
	soakMaxFrame       = 262144
	soakOutbound       = 1 << 20
	soakGlobalOutbound = 32 << 20
	soakPerCredential  = 32
	// soakSlack is what crewd may grow besides its outbound queues over the soak: Pebble's memtables (2 × 16 MiB),
	// the Go runtime's headroom over a heap that the honest crew's usage reports do not grow.
	soakSlack = 96 << 20
)

func soakDuration(t *testing.T) time.Duration {
	return gatedDuration(t, "CREWLOG_SOAK", "the hostile-mix soak", 30*time.Minute)
}

// gatedDuration skips t unless $gate is 1, and returns $gate_DURATION (default def): the length of a long run
// that the default suite leaves out.
func gatedDuration(t *testing.T, gate, what string, def time.Duration) time.Duration {
	if os.Getenv(gate) != "1" {
		t.Skipf("set %s=1 to run %s (%s_DURATION, default %v)", gate, what, gate, def)
	}
	s := os.Getenv(gate + "_DURATION")
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	require.NoError(t, err, gate+"_DURATION")
	require.Positive(t, d, gate+"_DURATION")
	return d
}

// soakStats are the hostile clients' observations, checked at the end.
type soakStats struct {
	revocations, revokedFrames, revokeLeaks atomic.Int64 // revocations done; ended with a revoked frame; pushed the revocation
	revokeReplays                           atomic.Int64 // earlier revocations replayed to the subscriptions (the check is not vacuous)
	revokeAttempts                          atomic.Int64
	connRefusals, connResets                atomic.Int64 // dials refused with too-many-connections; refused otherwise
	floodRequests, waitRefusals             atomic.Int64
	stalledSubscribers                      atomic.Int64
	hostileOpen                             atomic.Int64 // hostile connections open at once, at most
}

func TestSoakHostileMix(t *testing.T) {
	total := soakDuration(t)
	window := min(max(total/12, 5*time.Second), time.Minute)
	windows := max(int(total/window)&^1, 2) // even: as many alone as hostile
	ctx := testContext(t, total+5*time.Minute)
	d := newDaemon(t, "--max-conns", strconv.Itoa(soakMaxConns), "--reserved-conns", "64",
		"--max-conns-per-credential", strconv.Itoa(soakPerCredential), "--outbound-bytes", strconv.Itoa(soakOutbound),
		"--global-outbound-bytes", strconv.Itoa(soakGlobalOutbound), "--max-frame", strconv.Itoa(soakMaxFrame),
		"--max-waits-per-credential", "32",
		// NB: no events quota: the honest crew reports usage into one run for the whole soak (over 2,000 events a
		// second here), which passed the default quota of a million events after some seven minutes, so every soak
		// longer than that, its 30-minute default included, failed on a refusal the soak does not measure. Nor a
		// bytes quota, which counts every string of those events (their ids included) and would bind a longer
		// soak the same way.
		"--quota-events", "0", "--quota-bytes", "0")
	t.Cleanup(d.cleanup)
	d.start()

	honest := newCrew(ctx, t, d, "H0", "H1", "H2", "H3")
	hostile := newCrew(ctx, t, d, "X0", "X1", "X2", "X3")
	for _, c := range []*crew{honest, hostile} {
		require.NoError(t, d.mustDial(ctx, c.orch).Call(ctx, "run.transition", map[string]any{"to": "running"}, nil))
	}
	var (
		stats    soakStats
		rssMax   atomic.Int64
		acked    [4]atomic.Int64 // the last usage report acknowledged per honest task
		alone    []time.Duration
		withMix  []time.Duration
		rssAlone int64
	)
	pid := d.cmd.Process.Pid
	sampleRSS := func() int64 {
		r := rssBytes(t, pid)
		for {
			m := rssMax.Load()
			if r <= m || rssMax.CompareAndSwap(m, r) {
				return r
			}
		}
	}
	for w := 0; w < windows; w++ {
		withHostiles := w%2 == 1
		wctx, cancel := context.WithTimeout(ctx, window)
		var hostiles sync.WaitGroup
		if withHostiles {
			startHostiles(wctx, t, d, hostile, &stats, &hostiles)
		}
		lat := runHonest(wctx, t, d, honest, &acked)
		sampleEverySecond(wctx, func() { sampleRSS() })
		<-lat.done
		cancel()
		hostiles.Wait()
		if withHostiles {
			withMix = append(withMix, lat.samples...)
		} else {
			alone = append(alone, lat.samples...)
			rssAlone = max(rssAlone, sampleRSS())
		}
		require.Empty(t, lat.errs, "honest crew errors in window %d", w)
	}

	// Zero acknowledged commands lost: each task's usage is at least its last report acknowledged.
	o := d.mustDial(ctx, honest.orch)
	var tasks struct {
		Tasks []struct {
			ID    string `json:"id"`
			Usage struct {
				Input int64 `json:"input"`
			} `json:"usage"`
		} `json:"tasks"`
	}
	require.NoError(t, o.Call(ctx, "query.tasks", map[string]any{}, &tasks))
	for _, task := range tasks.Tasks {
		var i int
		_, err := fmt.Sscanf(task.ID, "H%d", &i)
		require.NoError(t, err)
		// The report in flight when a window ended may have committed unacknowledged: at most one more.
		require.GreaterOrEqual(t, task.Usage.Input, acked[i].Load(), "task %s: an acknowledged usage report is missing", task.ID)
		require.LessOrEqual(t, task.Usage.Input, acked[i].Load()+1, "task %s", task.ID)
	}

	p := func(d []time.Duration, q float64) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[min(len(s)-1, int(q*float64(len(s))))]
	}
	bound := rssAlone + soakGlobalOutbound + stats.hostileOpen.Load()*soakMaxFrame + soakSlack
	t.Logf("soak %v in %d windows of %v; honest task.usage: alone n=%d p50 %v p99 %v; with hostile clients n=%d p50 %v p99 %v (ratio p99 %.2f)",
		total, windows, window, len(alone), p(alone, 0.5), p(alone, 0.99), len(withMix), p(withMix, 0.5), p(withMix, 0.99),
		float64(p(withMix, 0.99))/float64(p(alone, 0.99)))
	t.Logf("crewd RSS: max %d MiB (max while alone %d MiB; bound %d MiB = alone + global outbound %d MiB + %d hostile conns × max-frame + slack %d MiB)",
		rssMax.Load()>>20, rssAlone>>20, bound>>20, soakGlobalOutbound>>20, stats.hostileOpen.Load(), soakSlack>>20)
	t.Logf("hostile: %d revocations (%d ended by a revoked frame, %d leaked the revocation event, %d earlier ones replayed), %d connection refusals (%d not too-many-connections), %d flood requests, %d wait refusals, %d stalled subscribers",
		stats.revocations.Load(), stats.revokedFrames.Load(), stats.revokeLeaks.Load(), stats.revokeReplays.Load(), stats.connRefusals.Load(),
		stats.connResets.Load(), stats.floodRequests.Load(), stats.waitRefusals.Load(), stats.stalledSubscribers.Load())

	require.LessOrEqual(t, p(withMix, 0.99), 2*p(alone, 0.99), "honest p99 with hostile clients within 2× of alone")
	require.LessOrEqual(t, rssMax.Load(), bound, "crewd RSS within its budgets")
	require.Equal(t, stats.revocations.Load(), stats.revokedFrames.Load(), "every revocation ended its connection with a revoked frame")
	require.Zero(t, stats.revokeLeaks.Load(), "no revoked connection was pushed its revocation")
	require.Positive(t, stats.revokeReplays.Load(), "the subscriptions did receive the earlier revocations")
	require.Zero(t, stats.connResets.Load(), "every refused connection got a code, not a reset")
	require.Positive(t, stats.connRefusals.Load(), "the connection flood hit its limit")
}

// honestRun is one window of the honest crew.
type honestRun struct {
	samples []time.Duration
	errs    []error
	done    chan struct{}
}

// runHonest runs the honest crew until ctx ends: per task, an orchestrator connection reporting usage (the
// command whose latency is measured) and the task's worker reading its inbox.
func runHonest(ctx context.Context, t *testing.T, d *daemon, c *crew, acked *[4]atomic.Int64) *honestRun {
	r := &honestRun{done: make(chan struct{})}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for i := 0; i < 4; i++ {
		task := fmt.Sprintf("H%d", i)
		o, err := d.dial(ctx, c.orch)
		require.NoError(t, err)
		w, err := d.dial(ctx, c.workers[task])
		require.NoError(t, err)
		wg.Add(2)
		go func() {
			defer wg.Done()
			defer o.Close()
			var mine []time.Duration
			var failed error
			for ctx.Err() == nil {
				n := acked[i].Load() + 1
				start := time.Now()
				err := o.Call(ctx, "task.usage", map[string]any{"taskId": task, "input": n, "output": 1, "cacheRead": 0, "cacheWrite": 0}, nil)
				if err != nil {
					if ctx.Err() == nil {
						failed = err
					}
					break
				}
				mine = append(mine, time.Since(start))
				acked[i].Store(n)
			}
			mu.Lock()
			r.samples = append(r.samples, mine...)
			if failed != nil {
				r.errs = append(r.errs, failed)
			}
			mu.Unlock()
		}()
		go func() {
			defer wg.Done()
			defer w.Close()
			for ctx.Err() == nil {
				if err := w.Call(ctx, "msg.inbox", map[string]any{"limit": 10}, nil); err != nil {
					if ctx.Err() == nil {
						mu.Lock()
						r.errs = append(r.errs, err)
						mu.Unlock()
					}
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(r.done) }()
	return r
}

// windowOpen reports whether ctx's deadline is still ahead. Not ctx.Err(): a dial that starts after the deadline
// fails with "i/o timeout" before ctx's own timer has cancelled it, and that is the window ending, not a refusal.
func windowOpen(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ctx.Err() == nil && (!ok || time.Now().Before(d))
}

// startHostiles starts the hostile clients of one window on the hostile run; they stop when ctx ends.
func startHostiles(ctx context.Context, t *testing.T, d *daemon, c *crew, st *soakStats, wg *sync.WaitGroup) {
	var open atomic.Int64
	track := func(n int64) {
		v := open.Add(n)
		for {
			m := st.hostileOpen.Load()
			if v <= m || st.hostileOpen.CompareAndSwap(m, v) {
				return
			}
		}
	}
	goHostile := func(f func()) { wg.Add(1); go func() { defer wg.Done(); f() }() }

	// The event source: the hostile orchestrator commits usage events as fast as it can.
	goHostile(func() {
		o, err := d.dial(ctx, c.orch)
		if err != nil {
			return
		}
		defer o.Close()
		for i := 1; ctx.Err() == nil; i++ {
			o.Call(ctx, "task.usage", map[string]any{"taskId": "X0", "input": i, "output": 1, "cacheRead": 0, "cacheWrite": 0}, nil)
		}
	})
	// Never-reading subscribers: subscribe from 0, read nothing, subscribe again every second (a replay each).
	for i := 0; i < 24; i++ {
		goHostile(func() {
			nc, err := net.Dial("unix", d.socket)
			if err != nil {
				return
			}
			track(1)
			defer track(-1)
			defer nc.Close()
			hello, _ := json.Marshal(map[string]any{"id": "h", "method": "hello", "params": c.workers["X1"]})
			nc.Write(append(hello, '\n'))
			st.stalledSubscribers.Add(1)
			for ctx.Err() == nil {
				nc.SetWriteDeadline(time.Now().Add(time.Second))
				nc.Write([]byte(`{"id":"s","method":"events.subscribe","params":{"sinceSeq":0}}` + "\n"))
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			}
		})
	}
	// Request floods: pipelined pings, queries and waits beyond the credential's limit.
	for i := 0; i < 4; i++ {
		goHostile(func() {
			w, err := d.dial(ctx, c.workers["X2"])
			if err != nil {
				return
			}
			track(1)
			defer track(-1)
			defer w.Close()
			for ctx.Err() == nil {
				var e error
				switch st.floodRequests.Add(1) % 3 {
				case 0:
					e = w.Call(ctx, "ping", nil, nil)
				case 1:
					e = w.Call(ctx, "events.since", map[string]any{"sinceSeq": 0, "limit": 1000}, nil)
				case 2:
					go func() {
						if wire.CodeOf(w.Call(ctx, "task.waitStatus", map[string]any{"taskId": "X3", "until": "completed", "timeoutMs": 5000}, nil)) == wire.CodeTooManyWaits {
							st.waitRefusals.Add(1)
						}
					}()
				}
				if errors.Is(e, client.ErrClosed) {
					return
				}
			}
		})
	}
	// Connection floods: one token dials past its limit, again and again.
	goHostile(func() {
		for ctx.Err() == nil {
			var held []*client.Client
			for i := 0; i < soakPerCredential+8 && ctx.Err() == nil; i++ {
				cl, err := d.dial(ctx, c.workers["X3"])
				switch {
				case err == nil:
					held = append(held, cl)
					track(1)
				case wire.CodeOf(err) == wire.CodeTooManyConnections:
					st.connRefusals.Add(1)
				case windowOpen(ctx):
					if st.connResets.Add(1) <= 3 {
						t.Logf("a refused connection without too-many-connections: %v", err)
					}
				}
			}
			for _, cl := range held {
				cl.Close()
				track(-1)
			}
		}
	})
	// Revocations: a fresh credential, a subscribed connection, revoked; the connection must end with one
	// revoked frame and its subscription must not deliver the revocation.
	goHostile(func() {
		o, err := d.dial(ctx, c.orch)
		if err != nil {
			return
		}
		defer o.Close()
		for ctx.Err() == nil {
			var cred credential
			if o.Call(ctx, "credential.issue", map[string]any{"taskId": "X0"}, &cred) != nil {
				return
			}
			w, err := d.dial(ctx, client.Hello{RunID: c.runID, TaskID: "X0", Token: cred.Token})
			if err != nil {
				return
			}
			sub, err := w.Subscribe(ctx, 0, []string{"credential.revoked"})
			if err != nil {
				w.Close()
				return
			}
			reason := fmt.Sprintf("soak-%d", st.revokeAttempts.Add(1)) // unique even when an answer is lost at a window's end
			if o.Call(ctx, "credential.revoke", map[string]any{"taskId": "X0", "reason": reason}, nil) != nil {
				w.Close()
				sub.Close()
				return
			}
			st.revocations.Add(1)
			<-w.Done()
			if wire.CodeOf(w.Err()) == wire.CodeRevoked {
				st.revokedFrames.Add(1)
			}
			for {
				ev, err := sub.Next(ctx)
				if err != nil {
					break
				}
				var data struct {
					Data struct {
						Reason string `json:"reason"`
					} `json:"data"`
				}
				st.revokeReplays.Add(1)
				if json.Unmarshal(ev.Data, &data) == nil && data.Data.Reason == reason {
					st.revokeLeaks.Add(1) // earlier revocations are replayed; this one must not be
				}
			}
		}
	})
}
