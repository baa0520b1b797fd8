package broker

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// try is call without require, for goroutines other than the test's: the answer to one request (pushes are
// skipped), or the error that ended the connection.
func (c *client) try(method string, params any) (wire.Response, error) {
	c.n++
	id := fmt.Sprintf("t%d", c.n)
	b, err := json.Marshal(map[string]any{"id": id, "method": method, "params": params})
	if err != nil {
		return wire.Response{}, err
	}
	c.nc.SetWriteDeadline(time.Now().Add(guard))
	if _, err := c.nc.Write(append(b, '\n')); err != nil {
		return wire.Response{}, err
	}
	for {
		f, err := c.read()
		if err != nil {
			return wire.Response{}, err
		}
		var probe struct {
			ID *string `json:"id"`
		}
		if err := json.Unmarshal(f, &probe); err != nil {
			return wire.Response{}, err
		}
		if probe.ID == nil || *probe.ID != id {
			continue // a push, or an answer to an earlier call
		}
		var r wire.Response
		return r, json.Unmarshal(f, &r)
	}
}

// hostileRun creates run id with one running executor task "t1" (cwd /<id>) and returns its orchestrator and
// worker connections.
func (f *fixture) hostileRun(id string) (orch, worker *client) {
	f.t.Helper()
	a := f.dial()
	a.helloAdmin()
	orch = f.dial()
	orch.hello(id, events.OrchestratorKey,
		a.ok("run.create", map[string]any{"runId": id, "team": "t", "goal": "g", "cwd": "/" + id})["orchestratorToken"].(string))
	orch.ok("run.transition", map[string]any{"to": "running"})
	orch.ok("task.create", map[string]any{"taskId": "t1", "role": "executor", "agent": "a", "title": "t", "cwd": "/" + id})
	orch.ok("task.transition", map[string]any{"taskId": "t1", "to": "running"})
	worker = f.dial()
	worker.hello(id, "t1", orch.ok("credential.issue", map[string]any{"taskId": "t1"})["token"].(string))
	return orch, worker
}

// TestMessageFloodHitsRunQuota: a worker flooding msg.send is refused rate-limit once its run passes the message
// rate quota, and a run flooding large bodies quota-exceeded once it passes the bytes quota — each refusal an
// error frame on a connection that stays open, never a reset — while another run's worker, sending at the same
// time, is never refused. The refusals are recorded once per run per minute, not once per refused message.
func TestMessageFloodHitsRunQuota(t *testing.T) {
	cfg := projections.DefaultConfig()
	cfg.QuotaMsgsPerMin, cfg.QuotaBytes = 50, 1<<20
	f := newFixture(t, fixtureOpts{config: &cfg})
	_, flooder := f.hostileRun("A")
	_, big := f.hostileRun("C")
	honestOrch, honest := f.hostileRun("B")

	type tally struct {
		ok    int
		codes map[wire.Code]int
		err   error
	}
	flood := func(c *client, n int, body string) *tally {
		tl := &tally{codes: map[wire.Code]int{}}
		for range n {
			r, err := c.try("msg.send", map[string]any{"to": "parent", "body": body})
			if err != nil {
				tl.err = err
				return tl
			}
			if r.Error != nil {
				tl.codes[r.Error.Code]++
			} else {
				tl.ok++
			}
		}
		return tl
	}
	var (
		wg                 sync.WaitGroup
		small, large, fair *tally
	)
	wg.Add(3)
	go func() { defer wg.Done(); small = flood(flooder, 500, "spam") }()
	go func() { defer wg.Done(); large = flood(big, 40, strings.Repeat("x", 100_000)) }()
	go func() { defer wg.Done(); fair = flood(honest, 40, "progress") }()
	awaitGroup(t, &wg, "end of the three floods")

	require.NoError(t, small.err, "refusals are frames, the connection stays")
	require.Equal(t, 50, small.ok)
	require.Equal(t, map[wire.Code]int{wire.CodeRateLimit: 450}, small.codes)
	require.NoError(t, large.err)
	require.Equal(t, 10, large.ok, "ten 100 KB bodies fit 1 MiB")
	require.Equal(t, map[wire.Code]int{wire.CodeQuotaExceeded: 30}, large.codes)
	require.NoError(t, fair.err)
	require.Equal(t, 40, fair.ok, "another run is not affected")
	require.Empty(t, fair.codes)
	require.Equal(t, 40, int(honestOrch.ok("query.mailbox", map[string]any{})["total"].(float64)))

	// One run.quota_exceeded per flooding run, naming the quota.
	for run, quota := range map[string]string{"A": events.QuotaMsgRate, "C": events.QuotaBytes} {
		var recorded []map[string]any
		f.eng.Read(func(st *projections.State) {
			r, _ := st.Run(run)
			require.NotZero(t, r.Usage.QuotaNotedAt)
		})
		res := f.dial()
		res.helloAdmin()
		for since, more := 0.0, true; more; {
			page := res.ok("events.since", map[string]any{"runId": run, "sinceSeq": since})
			for _, ev := range page["events"].([]any) {
				if e := ev.(map[string]any); e["type"] == events.TypeRunQuotaExceeded {
					recorded = append(recorded, e["data"].(map[string]any))
				}
			}
			next := page["nextSeq"].(float64)
			if more = page["hasMore"] == true; more {
				require.Greater(t, next, since, "events.since after %v: more, at a nextSeq that moves on by nothing", since)
			}
			since = next
		}
		require.Len(t, recorded, 1, run)
		require.Equal(t, quota, recorded[0]["quota"])
		require.Equal(t, "t1", recorded[0]["taskId"])
	}
}

// TestLongDelegationsCannotStarveAnotherRun: run A takes the whole pool with day-long delegations while nobody
// waits. Run B is refused and from then on waits; a worker or orchestrator sees only its own run's slot holders,
// and is forbidden to name the other run.
// The admin cancels one of A's delegations by subId alone and settles it; then A floods delegate.request while B
// retries: whatever the interleaving, A (holding its share) never gets the free slot and B does.
func TestLongDelegationsCannotStarveAnotherRun(t *testing.T) {
	cfg := projections.DefaultConfig() // 2 slots, share 1
	f := newFixture(t, fixtureOpts{config: &cfg})
	_, hog := f.hostileRun("A")
	waiterOrch, waiter := f.hostileRun("B")
	long := map[string]any{"prompt": "forever", "timeoutSec": 86400}
	s1 := hog.ok("delegate.request", long)["grandchildTaskRef"].(string)
	s2 := hog.ok("delegate.request", long)["grandchildTaskRef"].(string)
	e := waiter.fails("delegate.request", map[string]any{"prompt": "mine"}, wire.CodePolicyDenied)
	require.Contains(t, e.Message, "exhausted")

	require.ElementsMatch(t, []any{s1, s2}, hog.ok("query.slots", nil)["subIds"])
	require.Equal(t, []any{}, waiter.ok("query.slots", nil)["subIds"], "another run's holders are not shown")
	require.Equal(t, 2.0, waiter.ok("query.slots", nil)["held"], "the pool is daemon-wide")
	require.Equal(t, []any{}, waiterOrch.ok("query.slots", nil)["subIds"], "nor to another run's orchestrator")
	require.Equal(t, 2.0, waiterOrch.ok("query.slots", nil)["held"], "the pool is daemon-wide")
	// Naming the other run is no way to its holders: forbidden, as every request naming another run.
	waiter.fails("query.slots", map[string]any{"runId": "A"}, wire.CodeForbidden)
	waiterOrch.fails("query.slots", map[string]any{"runId": "A"}, wire.CodeForbidden)
	require.Equal(t, []any{}, waiter.ok("query.slots", map[string]any{"runId": "B"})["subIds"])

	admin := f.dial()
	admin.helloAdmin()
	require.ElementsMatch(t, []any{s1, s2}, admin.ok("query.slots", nil)["subIds"])
	admin.ok("delegate.cancel", map[string]any{"subId": s1, "reason": "slot hog"})
	admin.ok("delegate.settle", map[string]any{"runId": "A", "subId": s1, "outcome": "cancelled", "text": "cancelled"})

	var (
		wg      sync.WaitGroup
		granted []string
		hogErr  error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 50 {
			r, err := hog.try("delegate.request", long)
			if err != nil {
				hogErr = err
				return
			}
			if r.Error == nil {
				granted = append(granted, string(r.Result))
			}
		}
	}()
	got := waiter.ok("delegate.request", map[string]any{"prompt": "mine"})
	awaitGroup(t, &wg, "end of the hog's requests")
	require.NoError(t, hogErr)
	require.Empty(t, granted, "A never exceeds its share while B waits")
	require.Equal(t, true, got["ok"])
	require.Equal(t, []any{got["grandchildTaskRef"]}, waiter.ok("query.slots", nil)["subIds"])
}
