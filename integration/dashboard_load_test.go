package integration

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/httpapi"
)

// The dashboard load test (docs/benchmarks.md, "Dashboards"). Off by default:
//
//	CREWLOG_DASHBOARD_LOAD=1 CREWLOG_DASHBOARD_LOAD_DURATION=2m go test ./integration -run TestDashboardLoad -v -timeout 0
//
// 64 clients drive the engine over the socket (each an orchestrator connection reporting one task's usage: one
// command, one event, as fast as it is answered) in windows that alternate between no dashboard and 50 open
// dashboards, each an SSE stream of every event. The p99 of the clients' commands with dashboards must stay
// within 1.2× of the p99 without, within this run (the machine's drift hits both alike), and crewd's RSS within
// its stated bound.

const (
	loadClients    = 64
	loadDashboards = 50
	// loadSlack is what crewd may grow besides the streams' buffers: Pebble's memtables (2 × 16 MiB) and the Go
	// runtime's headroom.
	loadSlack = 96 << 20
	// streamInFlight is what one stream may hold besides the shared ring (httpapi's streamBatchBytes).
	streamInFlight = 256 << 10
)

func TestDashboardLoad(t *testing.T) {
	total := gatedDuration(t, "CREWLOG_DASHBOARD_LOAD", "the dashboard load test", 2*time.Minute)
	window := min(max(total/8, 10*time.Second), time.Minute)
	windows := max(int(total/window)&^1, 2)
	ctx := testContext(t, total+5*time.Minute)
	d := newDaemon(t, "--max-conns-per-credential", strconv.Itoa(2*loadClients))
	t.Cleanup(d.cleanup)
	d.start()
	login := d.dashboardURL(t)
	base := login[:strings.Index(login, "/login")]

	tasks := make([]string, loadClients)
	for i := range tasks {
		tasks[i] = fmt.Sprintf("T%02d", i)
	}
	c := newCrew(ctx, t, d, tasks...)
	require.NoError(t, d.mustDial(ctx, c.orch).Call(ctx, "run.transition", map[string]any{"to": "running"}, nil))

	var (
		alone, withDash  []time.Duration
		rssAlone, rssMax int64
		events, resyncs  atomic.Int64
	)
	pid := d.cmd.Process.Pid
	for w := 0; w < windows; w++ {
		dashboards := w%2 == 1
		wctx, cancel := context.WithTimeout(ctx, window)
		var streams sync.WaitGroup
		if dashboards {
			for i := 0; i < loadDashboards; i++ {
				streams.Add(1)
				go func() {
					defer streams.Done()
					dashboard(wctx, base, d.adminToken(), &events, &resyncs)
				}()
			}
		}
		run := driveEngine(wctx, d, c, tasks)
		sampleEverySecond(wctx, func() {
			r := rssBytes(t, pid)
			rssMax = max(rssMax, r)
			if !dashboards {
				rssAlone = max(rssAlone, r)
			}
		})
		<-run.done
		cancel()
		streams.Wait()
		require.Empty(t, run.errs, "client errors in window %d", w)
		if dashboards {
			withDash = append(withDash, run.samples...)
		} else {
			alone = append(alone, run.samples...)
		}
	}
	p := func(d []time.Duration, q float64) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[min(len(s)-1, int(q*float64(len(s))))]
	}
	bound := rssAlone + 2*httpapi.DefaultStreamBytes + loadDashboards*streamInFlight + loadSlack
	ratio := float64(p(withDash, 0.99)) / float64(p(alone, 0.99))
	t.Logf("dashboard load %v in %d windows of %v, %d clients; task.usage alone n=%d p50 %v p99 %v; with %d dashboards n=%d p50 %v p99 %v (ratio p99 %.2f)",
		total, windows, window, loadClients, len(alone), p(alone, 0.5), p(alone, 0.99), loadDashboards, len(withDash),
		p(withDash, 0.5), p(withDash, 0.99), ratio)
	t.Logf("dashboards received %d events, %d resyncs; crewd RSS max %d MiB (alone %d MiB; bound %d MiB = alone + ring %d MiB + %d streams × %d KiB + slack %d MiB)",
		events.Load(), resyncs.Load(), rssMax>>20, rssAlone>>20, bound>>20, 2*httpapi.DefaultStreamBytes>>20,
		loadDashboards, streamInFlight>>10, loadSlack>>20)
	require.Positive(t, events.Load(), "the dashboards streamed")
	require.LessOrEqual(t, ratio, 1.2, "the clients' p99 with 50 dashboards within 1.2× of without")
	require.LessOrEqual(t, rssMax, bound, "crewd RSS within its bound")
}

// driveEngine runs the 64 clients until ctx ends; the result is complete once done is closed.
func driveEngine(ctx context.Context, d *daemon, c *crew, tasks []string) *honestRun {
	r := &honestRun{done: make(chan struct{})}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for _, task := range tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, err := d.dial(ctx, c.orch)
			if err != nil {
				mu.Lock()
				r.errs = append(r.errs, err)
				mu.Unlock()
				return
			}
			defer o.Close()
			var mine []time.Duration
			for n := int64(1); ctx.Err() == nil; n++ {
				start := time.Now()
				err := o.Call(ctx, "task.usage", map[string]any{"taskId": task, "input": n, "output": 1, "cacheRead": 0, "cacheWrite": 0}, nil)
				if err != nil {
					if ctx.Err() == nil {
						mu.Lock()
						r.errs = append(r.errs, err)
						mu.Unlock()
					}
					break
				}
				mine = append(mine, time.Since(start))
			}
			mu.Lock()
			r.samples = append(r.samples, mine...)
			mu.Unlock()
		}()
	}
	go func() { wg.Wait(); close(r.done) }()
	return r
}

// dashboard holds one SSE stream of every event open until ctx ends, counting events and resyncs; after a
// resync it reconnects, as the page does.
func dashboard(ctx context.Context, base, token string, events, resyncs *atomic.Int64) {
	for ctx.Err() == nil {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/stream", nil)
		if err != nil {
			return
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return
		}
		// NB: count frames on raw reads rather than parsing lines: the test's readers share the machine's cores
		// with crewd, and what is measured is crewd's cost, not a parser's. A marker split across two reads is
		// missed: the counts are approximate, the bytes are all read.
		buf := make([]byte, 256<<10)
		for {
			n, err := resp.Body.Read(buf)
			events.Add(int64(bytes.Count(buf[:n], []byte("\nid: "))))
			resyncs.Add(int64(bytes.Count(buf[:n], []byte("event: resync\n"))))
			if err != nil {
				break
			}
		}
		resp.Body.Close()
	}
}
