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
// one more per frameUnit bytes it takes on the wire, a hello helloCost units (a refused one: to its process,
// peerKey), and every event events.since returns to a credential, or its subscription reads from the log (pushed or
// filtered out), one more (a replay from seq 0 is the most expensive thing a client can ask for), as does every event
// of a cold run the log re-folds for a request of the credential (params.go); a worker's work costs its run's bucket
// as much. A bucket may go into debt: a page is served whole and charged after. A connection's reader reads its next
// request only when its credential's bucket, and its run's, hold a unit, a hello is answered and a subscription pulls
// only then, so a credential (or a run) that asks for more than its rate is back-pressured by its own sockets and
// costs the daemon no CPU while it waits. No refusal: a paced client is only slower.

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

// requestCost is what a request that took frameBytes of its connection's stream costs its credential (the blank
// lines before it included: wire.Reader.FrameBytes).
func requestCost(frameBytes int) int { return 1 + frameBytes/frameUnit }

// peerKey is the pacer's key of the process pid, which pays for its connections' refused hellos (a refusal has
// no credential to charge). NB: no credential key starts with a NUL (credKey: a run id first).
func peerKey(pid int) string { return "\x00peer " + strconv.Itoa(pid) }

// pacer holds the buckets of the credentials (and processes) charged recently, or of the runs. Its methods take the
// time, so tests drive them with an injected clock.
//
// A full bucket is no bucket (a key without one is full), so none is kept: a bucket found full when its key is
// paced is deleted, and a sweep deletes every full one whenever the map has doubled since the last sweep (from
// sweepFloor) or sweepAge has passed since it (a bucket's refill time, burst/rate, and a second at least: a second
// at the defaults), at a charge or a pacing. So the map holds at most twice sweepFloor or twice the buckets the
// last sweep left, which were not full yet: those of keys charged within the time their debt and burst take to
// refill, never one per process that ever sent a refused hello.
type pacer struct {
	rate  float64       // units per second; 0 disables pacing
	burst float64       // units a full bucket holds
	every time.Duration // sweepAge

	now    func() time.Time // time.Now; tests freeze it
	onWait func()           // nil; tests learn that a credential waits

	mu      sync.Mutex
	buckets map[string]bucket // NB: none full, but between sweeps
	sweptAt time.Time         // the last sweep's time
	swept   int               // buckets the last sweep left
}

// sweepFloor is the buckets below which the map is not swept for its size, only for its age.
const sweepFloor = 64

// sweepAge is the time between two sweeps for age of a pacer of burst units and rate units per second: the time a
// bucket at zero takes to fill, a second at least (a sweep reads every bucket), at most a year.
func sweepAge(burst, rate float64) time.Duration {
	return time.Duration(min(max(burst/rate, 1), 365*24*3600) * float64(time.Second))
}

// bucket is one credential's budget: level units at time at (negative: owed).
type bucket struct {
	level float64
	at    time.Time
}

// newPacer returns a pacer of rate units per second and burst units; rate ≤ 0 disables it.
func newPacer(rate, burst int) *pacer {
	if rate <= 0 {
		return &pacer{now: time.Now}
	}
	b := float64(max(burst, 1))
	return &pacer{rate: float64(rate), burst: b, every: sweepAge(b, float64(rate)), now: time.Now,
		buckets: make(map[string]bucket)}
}

// refill returns k's bucket brought up to now (full when k has none), with p.mu held; the map is left alone.
func (p *pacer) refill(k string, now time.Time) bucket {
	b, ok := p.buckets[k]
	if !ok {
		return bucket{level: p.burst, at: now}
	}
	return p.refilled(b, now)
}

func (p *pacer) refilled(b bucket, now time.Time) bucket {
	if dt := now.Sub(b.at); dt > 0 {
		b.level = min(p.burst, b.level+p.rate*dt.Seconds())
		b.at = now
	}
	return b
}

// tidy deletes every full bucket when the map has doubled since the last sweep or p.every has passed since it,
// with p.mu held: amortised over the charges that grew the map, or at most once per p.every.
func (p *pacer) tidy(now time.Time) {
	if len(p.buckets) < 2*max(p.swept, sweepFloor) && now.Sub(p.sweptAt) < p.every {
		return
	}
	for k, b := range p.buckets {
		if p.refilled(b, now).level >= p.burst {
			delete(p.buckets, k)
		}
	}
	p.sweptAt, p.swept = now, len(p.buckets)
}

// charge takes n units from the bucket of credential k ("" is the admin, never paced) at now.
func (p *pacer) charge(k string, n int, now time.Time) {
	if p.rate == 0 || k == "" || n <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.refill(k, now)
	b.level -= float64(n)
	p.buckets[k] = b
	p.tidy(now)
}

// delay is how long credential k must wait from now until its bucket holds one unit; 0 when it does.
func (p *pacer) delay(k string, now time.Time) time.Duration {
	if p.rate == 0 || k == "" {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tidy(now)
	b, ok := p.buckets[k]
	if !ok {
		return 0 // full; NB: not made here, so that a key that is never charged (a process's) costs nothing
	}
	if b = p.refilled(b, now); b.level >= p.burst {
		delete(p.buckets, k) // full: as good as none
		return 0
	}
	p.buckets[k] = b
	if b.level >= 1 {
		return 0
	}
	return time.Duration((1 - b.level) / p.rate * float64(time.Second))
}

// paceKeys name the buckets work is paced by and charged to: a credential's (credKey; peerKey for a process that
// pays for its hellos) in the server's pacer, and a run's (runKey) in its runPacer. "" names none: the admin is not
// paced, nor is a run's orchestrator by its run.
type paceKeys struct{ cred, run string }

// pace waits until the buckets of k may serve connection c again; false when c closed or stop was closed first
// (nil: never).
func (c *conn) pace(k paceKeys, stop <-chan struct{}) bool {
	p, runs := c.s.pacer, c.s.runPacer
	for {
		now := p.now()
		d := max(p.delay(k.cred, now), runs.delay(k.run, now))
		if d <= 0 {
			return true
		}
		if p.onWait != nil {
			p.onWait()
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-c.done:
			t.Stop()
			return false
		case <-stop:
			t.Stop()
			return false
		}
	}
}

// charge counts n units of work against the buckets of k, at the time of the credentials' pacer (runPacer's is
// not read).
func (s *Server) charge(k paceKeys, n int) {
	now := s.pacer.now()
	s.pacer.charge(k.cred, n, now)
	s.runPacer.charge(k.run, n, now)
}

// charge counts n units of work done for c against its credential's bucket and its run's.
func (c *conn) charge(n int) { c.s.charge(c.keys, n) }
