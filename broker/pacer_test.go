package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
)

// TestPacerBucket: a credential's bucket starts full, pays one unit per unit of work, may go into debt, refills
// at the rate up to the burst; the admin and a disabled pacer never wait, and credentials do not share buckets.
func TestPacerBucket(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	p := newPacer(100, 10, 0, 0) // 10 ms a unit
	for i := 0; i < 10; i++ {
		require.Zero(t, p.delay(cred("a"), t0), "unit %d of the burst", i)
		p.charge(cred("a"), 1, t0)
	}
	require.Equal(t, 10*time.Millisecond, p.delay(cred("a"), t0), "the burst is spent: one unit's time")
	require.Zero(t, p.delay(cred("b"), t0), "another credential has its own bucket")
	require.Zero(t, p.delay(cred("a"), t0.Add(10*time.Millisecond)), "one unit refilled")

	p.charge(cred("a"), 1000, t0.Add(10*time.Millisecond)) // a replay of 1,000 events, charged after it was served
	require.Equal(t, 10*time.Second, p.delay(cred("a"), t0.Add(10*time.Millisecond)),
		"the debt and one unit, at the rate")
	require.Zero(t, p.delay(cred("a"), t0.Add(10*time.Millisecond+10*time.Second)))

	require.Zero(t, p.delay(cred("a"), t0.Add(time.Hour)))
	p.charge(cred("a"), 11, t0.Add(time.Hour))
	require.Equal(t, 20*time.Millisecond, p.delay(cred("a"), t0.Add(time.Hour)),
		"an idle hour refills the burst, not more")

	p.charge(cred(""), 1e6, t0)
	require.Zero(t, p.delay(cred(""), t0), "the admin is not paced")
	off := newPacer(-1, 10, -1, 10)
	off.charge(cred("a"), 1e6, t0)
	require.Zero(t, off.delay(cred("a"), t0), "rate ≤ 0: no pacing")
}

// pacerClock drives the clock of f's pacer (its credentials' and its runs' buckets): real time until freeze, then
// only what advance adds.
type pacerClock struct {
	p      *pacer
	frozen atomic.Int64 // unix nanoseconds; 0: real time
}

// installPacerClock must be called before f's first connection (the pacer's goroutines read its clock).
func installPacerClock(f *fixture) *pacerClock {
	c := &pacerClock{p: f.srv.pacer}
	c.p.now = func() time.Time {
		if ns := c.frozen.Load(); ns != 0 {
			return time.Unix(0, ns)
		}
		return time.Now()
	}
	return c
}

// freeze stops the clock an hour ahead, so every bucket is full from then on.
func (c *pacerClock) freeze()                 { c.frozen.Store(time.Now().Add(time.Hour).UnixNano()) }
func (c *pacerClock) advance(d time.Duration) { c.frozen.Add(int64(d)) }

// pacerWaits tells a test when, once armed, a connection next waits on the pacer's clock: for its credential's
// budget, or a refused hello for its deadline.
type pacerWaits struct {
	t       testing.TB
	armed   atomic.Bool
	waiting chan struct{}
}

// watchPacerWaits must be called before f's first connection, as installPacerClock.
func watchPacerWaits(f *fixture) *pacerWaits {
	w := &pacerWaits{t: f.t, waiting: make(chan struct{}, 1)}
	f.srv.pacer.onWait = func() {
		if w.armed.CompareAndSwap(true, false) {
			w.waiting <- struct{}{}
		}
	}
	return w
}

func (w *pacerWaits) arm() { w.armed.Store(true) }

// await returns once a wait happened after arm, or fails with msg.
func (w *pacerWaits) await(msg string) {
	w.t.Helper()
	select {
	case <-w.waiting:
	case <-time.After(guard):
		w.t.Fatal(msg)
	}
}

// level is the units in credential k's bucket now.
func (c *pacerClock) level(k string) float64 {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	return c.p.creds.refill(k, c.p.now()).level
}

// cred names credential (or process) k's bucket alone.
func cred(k string) paceKeys { return paceKeys{cred: k} }

func workerKey(task string) string {
	return credKey(identity{role: events.RoleWorker, runID: runR, taskID: task, key: task})
}

// TestPacingChargesRequestsAndReplays: a hello costs helloCost units, every request one and one more per frameUnit
// bytes it took (blank lines before it included), and every event events.since or a subscription sends costs one
// more, on the credential that asked and on its run; the admin pays nothing.
func TestPacingChargesRequestsAndReplays(t *testing.T) {
	const runFull = 2 << 20
	f := newFixture(t, fixtureOpts{opts: Options{RatePerCredential: 1, BurstPerCredential: 1 << 20, RatePerRun: 1,
		BurstPerRun: runFull}})
	clock := installPacerClock(f)
	s := f.seed()
	clock.freeze()
	level := clock.level
	const full = 1 << 20
	p := f.dial()
	p.hello(runR, taskP, s.p)
	p.ok("ping", nil)
	require.Equal(t, float64(full-helloCost-1), level(workerKey(taskP)), "hello and ping")
	// A big request costs its bytes, and so do the blank lines before it: here 100 KiB of them and a ping of 100 KiB.
	big := `{"id":"big","method":"ping","params":{"pad":"` + strings.Repeat("x", 100<<10) + `"}}`
	p.sendLine(strings.Repeat("\n", 100<<10) + big)
	require.Equal(t, "big", p.answerOf("big").ID)
	spent := float64(helloCost + 1 + 1 + (100<<10+len(big)+1)/frameUnit)
	require.Equal(t, 51.0, spent-helloCost-1, "200 KiB cost 50 units more than a small request")
	require.Equal(t, full-spent, level(workerKey(taskP)), "a big ping after blank lines")

	page := p.ok("events.since", map[string]any{"sinceSeq": 0, "limit": 1000})
	n := len(page["events"].([]any))
	require.Positive(t, n)
	require.Equal(t, false, page["hasMore"])
	spent += float64(1 + n)
	require.Equal(t, full-spent, level(workerKey(taskP)), "events.since: the request and its %d events", n)

	p.ok("events.subscribe", map[string]any{"sinceSeq": 0})
	pushes := 0
	for _, f := range p.pending {
		pushes += teamEvents(t, f)
	}
	for pushes < n {
		f, err := p.read()
		require.NoError(t, err)
		pushes += teamEvents(t, f)
	}
	// NB: a pull charges what it read once it has pushed it, so the last pushes may arrive before their charge.
	want := full - spent - float64(1+1+n)
	require.Eventually(t, func() bool { return level(workerKey(taskP)) <= want }, 10*time.Second, time.Millisecond,
		"the subscription's replay is charged")
	require.Equal(t, want, level(workerKey(taskP)), "the subscription: the request, the event it checked and its replay")
	require.Equal(t, float64(full), level(workerKey(taskQ)), "Q did nothing")
	require.Equal(t, runFull-(full-want), clock.runLevel(runR), "P's run paid all that P did")

	a := f.dial()
	a.helloAdmin()
	a.ok("events.since", map[string]any{"runId": runR, "sinceSeq": 0})
	require.Equal(t, float64(full), level(credKey(identity{role: events.RoleAdmin})), "the admin is not charged")
}

// TestASubscriptionIsChargedEveryEventItReads: a subscription's pull was charged the events it pushed or filtered
// out, not the one it read past them: at maxScan, the event that told it there was more (which its next pull reads
// again), and one the log holds past the published position (not yet published: read again once it is), where
// events.since is charged the event it reads past its page. A pull is now charged every event it read of the log.
// So is events.subscribe the first event it would push, which it reads before its answer to learn that the log gives
// it back, where it was charged its request alone.
func TestASubscriptionIsChargedEveryEventItReads(t *testing.T) {
	for _, tc := range []struct {
		name     string
		usage    int  // events committed before the subscription, which its filter leaves out
		pastHead bool // the marker is committed as the first pull has read the published position, not before
		checked  int  // events the request read to learn that the log gives them back: the first it would push
	}{
		{"a pull that stops at maxScan", maxScan + 1, false, 1},
		{"a pull that meets an event not yet published", 0, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const full = 1 << 20
			f := newFixture(t, fixtureOpts{opts: Options{RatePerCredential: 1, BurstPerCredential: full}})
			clock := installPacerClock(f)
			s := f.seed()
			f.streamUsage(t, tc.usage)
			marker := func() {
				r, err := f.eng.Submit(context.Background(), commands.Request{Actor: events.Actor{Role: events.RoleOrchestrator},
					Command: &commands.MessageSend{RunID: runR, To: []string{taskP}, Body: `"marker"`}})
				require.NoError(t, err)
				require.Nil(t, r.Rejected)
			}
			since := uint64(0)
			if tc.pastHead {
				since = f.lastVersion(runR)
				var once sync.Once
				f.srv.onPull = func() { once.Do(marker) }
			} else {
				marker()
			}
			clock.freeze()
			p := f.dial()
			p.hello(runR, taskP, s.p)
			before := clock.level(workerKey(taskP))
			filter := []string{events.TypeMailboxAppended}
			p.ok("events.subscribe", map[string]any{"sinceSeq": since, "types": filter})
			var ev wire.Event
			for ev.Name != wire.EventTeamEvent {
				require.NoError(t, json.Unmarshal(p.nextFrame(), &ev))
			}
			last := f.lastVersion(runR)
			require.Equal(t, last, ev.Seq, "the marker, the run's last event, pushed")
			// NB: a subscription replaced has ended, its pulls charged, once the new one is answered; the new one
			// reads nothing.
			p.ok("events.subscribe", map[string]any{"sinceSeq": last, "types": filter})
			read := int(last-since) + 1 // the run's events after since, and the one read past a pull
			require.Equal(t, float64(1+tc.checked+read+1), before-clock.level(workerKey(taskP)),
				"the two subscriptions' requests, the event checked and the %d events read", read)
		})
	}
}

// teamEvents is 1 when frame is a team.event push.
func teamEvents(t *testing.T, frame []byte) int {
	var ev struct {
		Event string `json:"event"`
	}
	require.NoError(t, json.Unmarshal(frame, &ev))
	if ev.Event == wire.EventTeamEvent {
		return 1
	}
	return 0
}

// TestPacingHoldsTheReader: once a credential's bucket is empty its connection's next request is not read until
// the bucket refills (here: until the frozen clock moves), while another credential is served meanwhile.
func TestPacingHoldsTheReader(t *testing.T) {
	f := newFixture(t, fixtureOpts{opts: Options{RatePerCredential: 1000, BurstPerCredential: helloCost + 2}})
	clock := installPacerClock(f)
	waits := watchPacerWaits(f)
	s := f.seed()
	clock.freeze()
	waits.arm()
	p := f.dial()
	p.hello(runR, taskP, s.p) // helloCost units: 2 left
	// The 2 left, and a third request pipelined behind them.
	for _, id := range []string{"a", "b", "c"} {
		p.sendLine(`{"id":"` + id + `","method":"ping","params":{}}`)
	}
	for _, id := range []string{"a", "b"} {
		f, err := p.read()
		require.NoError(t, err)
		var r wire.Response
		require.NoError(t, json.Unmarshal(f, &r))
		require.Equal(t, id, r.ID)
	}
	waits.await("the reader did not wait for its credential's budget")
	require.Equal(t, float64(0), clock.level(workerKey(taskP)), "the third ping is not read while the bucket is empty")

	q := f.dial()
	q.hello(runR, taskQ, s.q)
	q.ok("ping", nil) // another credential is served while P waits

	clock.advance(time.Millisecond) // one unit at 1,000 a second
	frame, err := p.read()
	require.NoError(t, err)
	var r wire.Response
	require.NoError(t, json.Unmarshal(frame, &r))
	require.Equal(t, "c", r.ID, "the refilled bucket lets the reader go on")
}

// TestPacerForgetsFullBuckets: a full bucket is no bucket, so the pacer keeps only those of keys charged recently:
// a thousand processes' refused hellos leave no bucket once they have refilled and the pacer is next used (by any
// key), and keys charged one after another as the earlier ones refill never hold more than a few; a bucket in debt
// is kept, its debt whole.
func TestPacerForgetsFullBuckets(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	const keys = 1000
	for _, tc := range []struct {
		name  string
		touch func(p *pacer, now time.Time)
	}{
		{"a charge of another key", func(p *pacer, now time.Time) { p.charge(cred("x"), 1, now) }},
		{"a pacing of a refilled key", func(p *pacer, now time.Time) { p.delay(cred(peerKey(0)), now) }},
		{"a pacing of a key never charged", func(p *pacer, now time.Time) { p.delay(cred("y"), now) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPacer(DefaultRatePerCredential, DefaultRatePerCredential, 0, 0) // the defaults: a second's refill
			p.charge(cred("debtor"), 3*DefaultRatePerCredential, t0)                // owes two seconds' worth
			for pid := range keys {
				p.charge(cred(peerKey(pid)), helloCost, t0)
			}
			require.Len(t, p.creds.m, keys+1, "no bucket is full yet: none is forgotten")
			now := t0.Add(time.Second) // every process's bucket refilled, the debtor's not
			tc.touch(p, now)
			require.LessOrEqual(t, len(p.creds.m), 2, "the debtor's bucket and at most the touched key's")
			require.Equal(t, time.Second+200*time.Microsecond, p.delay(cred("debtor"), now),
				"the debtor still owes a second's worth and one unit")
		})
	}
	t.Run("keys charged as the earlier ones refill", func(t *testing.T) {
		p := newPacer(1, 1<<20, 0, 0) // a refill time of twelve days: only the map's growth sweeps it
		for pid := range keys {
			p.charge(cred(peerKey(pid)), helloCost, t0.Add(time.Duration(pid)*helloCost*time.Second))
			require.LessOrEqual(t, len(p.creds.m), 2*sweepFloor, "after %d keys", pid+1)
		}
	})
}

// TestSweepAge: the pacer sweeps for age once per refill time of a bucket, at least a second apart and at least
// once a year, whatever the options.
func TestSweepAge(t *testing.T) {
	const year = 365 * 24 * time.Hour
	for _, tc := range []struct {
		burst, rate float64
		want        time.Duration
	}{
		{DefaultRatePerCredential, DefaultRatePerCredential, time.Second},
		{1 << 20, 1, (1 << 20) * time.Second},
		{1, 1e9, time.Second},
		{math.MaxInt, 1, year},
	} {
		require.Equal(t, tc.want, sweepAge(tc.burst, tc.rate), "burst %v, rate %v", tc.burst, tc.rate)
	}
}

// BenchmarkPacerWorkerRequest: what pacing costs a worker's request, its reader's check of its credential's and its
// run's buckets and the request's charge to both, on one connection and on connections of one run's workers at
// once. The buckets hold more than any run of it spends, so nothing waits: this is the cost every request pays.
func BenchmarkPacerWorkerRequest(b *testing.B) {
	const plenty = 1 << 40
	perRun := DefaultRatePerRun(DefaultRatePerCredential)
	s := &Server{pacer: newPacer(DefaultRatePerCredential, plenty, perRun, plenty)}
	b.Run("one", func(b *testing.B) {
		c := &conn{s: s, keys: paceKeys{cred: workerKey(taskP), run: runR}}
		for range b.N {
			c.pace(c.keys, nil)
			c.charge(1)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		var n atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			c := &conn{s: s, keys: paceKeys{cred: workerKey(fmt.Sprint("W", n.Add(1))), run: runR}}
			for pb.Next() {
				c.pace(c.keys, nil)
				c.charge(1)
			}
		})
	})
}

// TestHTTPPacing: the dashboard's credentials are paced at the socket's rate per credential, each in a bucket of its
// own, apart from every socket credential's, so a read-only token's reads cannot spend a worker's budget nor
// the other way round.
func TestHTTPPacing(t *testing.T) {
	f := newFixture(t, fixtureOpts{opts: Options{RatePerCredential: 100, BurstPerCredential: 10}})
	c := installPacerClock(f)
	c.freeze()
	require.Zero(t, f.srv.HTTPDelay("ro:a"), "a full bucket")
	f.srv.HTTPCharge("ro:a", 1010) // a read of a cold run of 1,000 events and its own unit, charged after it
	require.Equal(t, 10010*time.Millisecond, f.srv.HTTPDelay("ro:a"), "the debt and one unit, at the rate")
	require.Zero(t, f.srv.HTTPDelay("ro:b"), "another token has its own bucket")
	require.Equal(t, float64(10), c.level(workerKey(taskP)), "no socket credential pays for it")
	require.Equal(t, float64(-1000), c.level(httpKey("ro:a")))
	c.advance(10010 * time.Millisecond)
	require.Zero(t, f.srv.HTTPDelay("ro:a"))

	off := newFixture(t, fixtureOpts{opts: Options{RatePerCredential: -1}})
	off.srv.HTTPCharge("ro:a", 1e6)
	require.Zero(t, off.srv.HTTPDelay("ro:a"), "no pacing")
}
