package httpapi

import (
	"context"
	"strings"
	"sync/atomic"
	"time"
)

// Pacing of the read-only credentials: the turns (readturns.go) bound the reads a credential has in progress, not
// what they cost. A read of a run that went cold reads it back from the log (Engine.Warm: its view, or every one of
// its events), and the cold runs' cache keeps a few: a token reading two large cold runs in turn had each read back
// every time, its four turns the daemon's CPU. So a read-only token's reads, as a socket credential's requests, are
// paced (Options.Pacer: the broker's buckets, at its rate per credential): a read waits, in its turn, until the
// credential's bucket holds a unit, and is charged one unit and the events of every cold run it had read back, of the
// log an events page read (events.go) and of its rebuild (rebuildpacing.go), one per searchUnit of the runs' fields a
// search of the runs went through (runsearch.go), and one per indexUnit of the cold runs' summaries a page of runs
// read from the index (runs.go). Its streams wait for it to open, as its reads do, and are
// charged one unit each, then wait for it before each read, of the log or of the hub's ring, and are charged the
// events of their run they read, sent or filtered out (stream.go).
// The admin's and the link crewd prints (its operator's) are not paced, as the socket's admin is not.

// costKey is the context key of a read's cost (readCost).
type costKey struct{}

// readCost is the units a paced read has cost so far beyond its own: the events of the cold runs it read back.
type readCost struct{ units atomic.Int64 }

// paced reports whether the credential with key is paced: a read-only token's.
func paced(key string) bool { return strings.HasPrefix(key, keyReadOnlyPrefix) }

// chargeRead adds n units to the cost of the read of ctx, if it is paced.
func chargeRead(ctx context.Context, n int64) {
	if c, ok := ctx.Value(costKey{}).(*readCost); ok && n > 0 {
		c.units.Add(n)
	}
}

// charging reports whether the read of ctx is paced: whether its cost is counted (chargeRead).
func charging(ctx context.Context) bool {
	_, ok := ctx.Value(costKey{}).(*readCost)
	return ok
}

// paceRead waits until the credential p may read again, or is no longer current (the caller refuses it then), and
// returns the context to serve the read with and a func that charges the read's cost once served; false when the
// client went first (it gets no answer).
func (s *Server) paceRead(ctx context.Context, p principal) (context.Context, func(), bool) {
	if !s.awaitPace(ctx, p) {
		return ctx, nil, false
	}
	pacer := s.opts.Pacer
	if pacer == nil || !paced(p.key) {
		return ctx, func() {}, true
	}
	cost := &readCost{}
	return context.WithValue(ctx, costKey{}, cost), func() { pacer.HTTPCharge(p.key, int(1+cost.units.Load())) }, true
}

// awaitPace waits until the credential p, if paced, may read again (its bucket holds a unit), or is no longer
// current (the caller refuses it then); false when ctx ended first.
func (s *Server) awaitPace(ctx context.Context, p principal) bool {
	return s.awaitPaceTicking(ctx, &p, nil, nil, nil)
}

// refusalAfterWait is the answer to a request of p's that waited (its turn, its credential's pacing), or nil when
// it may be served: stopping's once the server's Close began (it ends the wait rather than wait its grace for it),
// credentialGone's once p's credential no longer holds (authenticated when the request came, a credential revoked,
// or a session expired, meanwhile reads nothing, as if it came now).
func (s *Server) refusalAfterWait(p *principal) *apiError {
	if s.closeBegun() {
		return stopping()
	}
	if !s.current(p) {
		return credentialGone()
	}
	return nil
}

// awaitPaceTicking is awaitPace calling onTick each time tick ticks while p waits (a stream's keep-alive), once p is
// found current again, and ending the wait, true, once stop is closed (the hub's end, which a stream must not wait
// out its debt to learn of) or the server closes (its Close would wait its grace for the wait: the caller refuses
// the request, or ends its stream); false also when onTick returns false.
func (s *Server) awaitPaceTicking(ctx context.Context, p *principal, tick <-chan time.Time, onTick func() bool,
	stop <-chan struct{}) bool {
	pacer := s.opts.Pacer
	if pacer == nil || !paced(p.key) {
		return true
	}
	for {
		// NB: a credential revoked (or a session expired) does not wait out its debt, holding its connection's place.
		d := pacer.HTTPDelay(p.key)
		if d <= 0 || !s.current(p) {
			return true
		}
		holdLong(ctx) // NB: a wait of up to the debt: it ends when the client goes (clientwatch.go)
		if s.pacing != nil {
			s.pacing(*p)
		}
		t := time.NewTimer(min(d, credentialRecheck))
		select {
		case <-t.C:
		case <-tick:
			t.Stop()
			if s.current(p) && !onTick() {
				return false
			}
		case <-stop:
			t.Stop()
			return true
		case <-s.quit:
			t.Stop()
			return true
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
}

// chargeStream charges the credential with key, if paced, n units of a stream's: its opening's one, or the events it
// read from the log to catch up, or read of the hub's one read of them for every stream.
func (s *Server) chargeStream(key string, n int) {
	if s.opts.Pacer != nil && paced(key) && n > 0 {
		s.opts.Pacer.HTTPCharge(key, n)
	}
}
