package broker

import (
	"strconv"
	"sync"
	"time"
)

// Per-credential and per-run pacing: CPU fairness between principals. Every credential but the admin's has a token
// bucket of RatePerCredential units per second holding at most BurstPerCredential, and every run one of RatePerRun
// holding at most BurstPerRun that its workers' credentials share (runKey: not its orchestrator's), so a run that
// issues a credential to each of its tasks is not served that many credentials' rate. A request costs one unit and
// one more per frameUnit bytes it takes on the wire (the blank lines a connection's stream ends with, one per
// frameUnit bytes too), a hello helloCost units more (a refused one, and a first frame that is no hello: to its
// process, peerKey), and every event events.since reads for a credential (those it returns and the one past the
// page), or its subscription reads from the log (pushed or filtered out), one more (a replay from seq 0 is the most
// expensive thing a client can ask for), as does every event of a cold run the log re-folds
// for a request of the credential (params.go); a worker's work costs its run's bucket as much. A bucket may go into
// debt: a page is served whole and charged after. A connection's reader reads its next request only when its
// credential's bucket, and its run's, hold a unit, a hello is answered and a subscription pulls only then, so a
// credential (or a run) that asks for more than its rate is back-pressured by its own sockets and costs the daemon no
// CPU while it waits. No refusal, but of a hello that would wait longer than helloPaceWait (its connection holds a
// place while it waits: paceUntil): a paced client is only slower.

// helloCost is what a hello costs its credential, accepted or refused by a connection limit: a connection's
// setup and teardown (accept, the peer check, two goroutines, the digest check, the close) and the client's own
// cost many times a small request, so a token dialling in a loop gets about a hundred connections a second at
// the default rate. A runtime opens a handful.
const helloCost = 50

// frameUnit is the bytes of a request that cost one more unit: reading, validating and decoding a request grows
// with its size, and a unit per request alone let a credential have its rate's worth of MaxFrame frames (or of
// blank lines, which are read all the same) parsed every second — several cores' worth at the defaults. A frame of
// a few KiB costs what a small request does; one of 256 KiB 65 units.
const frameUnit = 4096

// helloUnits is what a connection's first frame, which took frameBytes of its stream, costs whoever pays for it (a
// hello's credential, else its process): helloCost and, as for every request, one more per frameUnit bytes.
func helloUnits(frameBytes int) int { return helloCost + frameBytes/frameUnit }

// requestCost is what a request that took frameBytes of its connection's stream costs its credential (the blank
// lines before it included: wire.Reader.FrameBytes).
func requestCost(frameBytes int) int { return 1 + frameBytes/frameUnit }

// peerKey is the pacer's key of the process pid, which pays for its connections' refused hellos (a refusal has
// no credential to charge). NB: no credential key starts with a NUL (credKey: a run id first).
func peerKey(pid int) string { return "\x00peer " + strconv.Itoa(pid) }

// pacer holds the buckets of the credentials (and processes) charged recently, and those of the runs, under one
// mutex: a worker's request is paced by, and charged to, its credential's bucket and its run's in one acquisition
// each (a request's check and its charge take the lock once apiece). Its methods take the time, so tests drive them
// with an injected clock.
type pacer struct {
	now    func() time.Time // time.Now; tests freeze it
	onWait func()           // nil; tests learn that a connection waits on the pacer's clock

	mu    sync.Mutex
	creds buckets // RatePerCredential, by credKey or peerKey
	runs  buckets // RatePerRun, by runKey
}

// buckets are those of one kind of key, at one rate and burst.
//
// A full bucket is no bucket (a key without one is full), so none is kept: a bucket found full when its key is
// paced is deleted, and a sweep deletes every full one whenever the map has doubled since the last sweep (from
// sweepFloor) or sweepAge has passed since it (a bucket's refill time, burst/rate, and a second at least: a second
// at the defaults), at a charge or a pacing. So the map holds at most twice sweepFloor or twice the buckets the
// last sweep left, which were not full yet: those of keys charged within the time their debt and burst take to
// refill, never one per process that ever sent a refused hello.
type buckets struct {
	rate  float64       // units per second; 0 disables pacing
	burst float64       // units a full bucket holds
	every time.Duration // sweepAge

	m       map[string]bucket // NB: none full, but between sweeps
	sweptAt time.Time         // the last sweep's time
	swept   int               // buckets the last sweep left
}

// sweepFloor is the buckets below which the map is not swept for its size, only for its age.
const sweepFloor = 64

// sweepAge is the time between two sweeps for age of buckets of burst units and rate units per second: the time a
// bucket at zero takes to fill, a second at least (a sweep reads every bucket), at most a year.
func sweepAge(burst, rate float64) time.Duration {
	return time.Duration(min(max(burst/rate, 1), 365*24*3600) * float64(time.Second))
}

// bucket is one key's budget: level units at time at (negative: owed).
type bucket struct {
	level float64
	at    time.Time
}

// newPacer returns a pacer of rate units per second and burst units per credential, and runRate and runBurst per
// run; a rate ≤ 0 disables its kind.
func newPacer(rate, burst, runRate, runBurst int) *pacer {
	return &pacer{now: time.Now, creds: newBuckets(rate, burst), runs: newBuckets(runRate, runBurst)}
}

func newBuckets(rate, burst int) buckets {
	if rate <= 0 {
		return buckets{}
	}
	b := float64(max(burst, 1))
	return buckets{rate: float64(rate), burst: b, every: sweepAge(b, float64(rate)), m: make(map[string]bucket)}
}

// refill returns k's bucket brought up to now (full when k has none), with the pacer's mu held; the map is left
// alone.
func (bs *buckets) refill(k string, now time.Time) bucket {
	b, ok := bs.m[k]
	if !ok {
		return bucket{level: bs.burst, at: now}
	}
	return bs.refilled(b, now)
}

func (bs *buckets) refilled(b bucket, now time.Time) bucket {
	if dt := now.Sub(b.at); dt > 0 {
		b.level = min(bs.burst, b.level+bs.rate*dt.Seconds())
		b.at = now
	}
	return b
}

// tidy deletes every full bucket when the map has doubled since the last sweep or bs.every has passed since it,
// with the pacer's mu held: amortised over the charges that grew the map, or at most once per bs.every.
func (bs *buckets) tidy(now time.Time) {
	if len(bs.m) < 2*max(bs.swept, sweepFloor) && now.Sub(bs.sweptAt) < bs.every {
		return
	}
	for k, b := range bs.m {
		if bs.refilled(b, now).level >= bs.burst {
			delete(bs.m, k)
		}
	}
	bs.sweptAt, bs.swept = now, len(bs.m)
}

// take takes n units from the bucket of k ("" names none: never paced) at now, with the pacer's mu held.
func (bs *buckets) take(k string, n int, now time.Time) {
	if bs.rate == 0 || k == "" {
		return
	}
	b := bs.refill(k, now)
	b.level -= float64(n)
	bs.m[k] = b
	bs.tidy(now)
}

// wait is how long k must wait from now until its bucket holds one unit, 0 when it does, with the pacer's mu held.
func (bs *buckets) wait(k string, now time.Time) time.Duration {
	if bs.rate == 0 || k == "" {
		return 0
	}
	bs.tidy(now)
	b, ok := bs.m[k]
	if !ok {
		return 0 // full; NB: not made here, so that a key that is never charged (a process's) costs nothing
	}
	// NB: the refilled bucket is not written back: refilling from the stored one later gives the same level, and a
	// request would pay a map write for nothing.
	if b = bs.refilled(b, now); b.level >= bs.burst {
		delete(bs.m, k) // full: as good as none
		return 0
	}
	if b.level >= 1 {
		return 0
	}
	return time.Duration((1 - b.level) / bs.rate * float64(time.Second))
}

// off reports that nothing is paced: the lock is not taken at all.
func (p *pacer) off() bool { return p.creds.rate == 0 && p.runs.rate == 0 }

// httpKey is the pacer's key of the dashboard's credential key (httpapi.Pacer): buckets of their own, apart from
// the socket's credentials. NB: no credential key starts with a NUL (credKey: a run id first).
func httpKey(key string) string { return "\x00http " + key }

// HTTPDelay is how long the dashboard's credential with key must wait before its next read is served (0: none),
// by the rule and at the rate the socket's credentials are paced (RatePerCredential, BurstPerCredential), in a
// bucket of its own (httpapi.Pacer).
func (s *Server) HTTPDelay(key string) time.Duration {
	return s.pacer.delay(paceKeys{cred: httpKey(key)}, s.pacer.now())
}

// HTTPCharge counts n units of work done for the dashboard's credential with key (httpapi.Pacer).
func (s *Server) HTTPCharge(key string, n int) {
	s.pacer.charge(paceKeys{cred: httpKey(key)}, n, s.pacer.now())
}

// charge takes n units from the buckets of k at now.
func (p *pacer) charge(k paceKeys, n int, now time.Time) {
	if n <= 0 || k == (paceKeys{}) || p.off() {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.creds.take(k.cred, n, now)
	p.runs.take(k.run, n, now)
}

// delay is how long k must wait from now until its buckets hold one unit each; 0 when they do.
func (p *pacer) delay(k paceKeys, now time.Time) time.Duration {
	if k == (paceKeys{}) || p.off() {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return max(p.creds.wait(k.cred, now), p.runs.wait(k.run, now))
}

// paceKeys name the buckets work is paced by and charged to: a credential's (credKey; peerKey for a process that
// pays for its hellos) and a run's (runKey). "" names none: the admin is not paced, nor is a run's orchestrator by
// its run.
type paceKeys struct{ cred, run string }

// pace waits until the buckets of k may serve connection c again; false when c closed or stop was closed first
// (nil: never).
func (c *conn) pace(k paceKeys, stop <-chan struct{}) bool {
	return c.paceUntil(k, stop, time.Time{}) == paced
}

// paceResult is how a wait for the pacer ended.
type paceResult int

const (
	paced      paceResult = iota // the buckets may serve the connection
	paceClosed                   // the connection closed, or the wait was stopped
	paceLate                     // the buckets would not serve it by the deadline
)

// paceUntil is pace with a deadline by on the pacer's clock (zero: none): it returns paceLate, at once and without
// waiting out the rest, as soon as the buckets of k could not serve c by then. A hello waits with one, since while
// it waits its connection holds its place and its client, which may have gone (nothing reads its socket), cannot be
// told apart from one that is still there.
func (c *conn) paceUntil(k paceKeys, stop <-chan struct{}, by time.Time) paceResult {
	p := c.s.pacer
	for {
		now := p.now()
		d := p.delay(k, now)
		if d <= 0 {
			return paced
		}
		if !by.IsZero() && now.Add(d).After(by) {
			return paceLate
		}
		if p.onWait != nil {
			p.onWait()
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-c.done:
			t.Stop()
			return paceClosed
		case <-stop:
			t.Stop()
			return paceClosed
		}
	}
}

// charge counts n units of work against the buckets of k.
func (s *Server) charge(k paceKeys, n int) { s.pacer.charge(k, n, s.pacer.now()) }

// charge counts n units of work done for c against its credential's bucket and its run's.
func (c *conn) charge(n int) { c.s.charge(c.keys, n) }

// warm reads cold run runID back for c (commands.Engine.Warm), outside the state's lock, and charges c the events
// re-folded. Its error (projections.ErrNotReadBack: replay-failed) must be the answer: the run's queries would
// answer as if it held nothing.
func (c *conn) warm(runID string) error {
	n, err := c.s.eng.Warm(runID)
	c.charge(int(n))
	return err
}
