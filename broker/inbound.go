package broker

import (
	"net"
	"slices"
	"sync"
	"time"
)

// inboundBudget counts the bytes readers hold in lines longer than their read-ahead (the chunks wire.Reader spills
// them into) against a limit: the daemon's, GlobalInboundBytes, every connection's together; a credential's,
// InboundBytesPerCredential, its connections' together; a run's, InboundBytesPerRun, its workers' together. A
// reader takes a chunk's bytes from every budget it counts against (inboundShare), or waits for room in all of
// them (taking nothing from the socket meanwhile, so its client is held back by its own socket's buffer), for
// writeTimeout at most, then its connection is closed as for a line over the cap. Without the daemon's, every
// connection could hold a frame's worth of a line it never ends: (MaxConns+AdminConns) × MaxFrame, over 1 GiB at
// the defaults, and indefinitely on a connection with a subscription, which is never idle. Without the shares, the
// connections of one credential, or the workers of one run (a credential to each of its tasks), could hold all of
// the daemon's, and every other client's line longer than the read-ahead would wait, and close, until they ended
// theirs: one credential holds a sixteenth of it and one run a quarter by default, so it takes sixteen credentials,
// or four runs, to hold it all.
//
// NB: no deadline for ending a line begun. Memory is bounded by the budgets alone, and a deadline would not free a
// budget from a client that means to hold it: closed at the deadline, it dials again and sends another line, for
// the pace of a hello and of a line's bytes, well within a credential's rate. Before its hello a connection's line
// ends with the hello's deadline anyway; it has no credential yet, and counts against the daemon's budget and the
// one every connection before its hello counts against (Server.helloIn, a credential's share): without that, a
// client of a few processes that never said hello, dialling again as each connection was closed, held it all.
//
// Concurrency: every method is safe for concurrent use, but conns, under the server's mu (joinBudget).
type inboundBudget struct {
	mu    sync.Mutex
	used  int64
	limit int64
	// waiters are the readers waiting for room, in the order they came (reserve); a release counts its bytes for
	// those they fit, and wakes those alone (grant).
	waiters []*roomWaiter
	conns   int // the connections counting against a credential's or a run's, under the server's mu
}

// roomWaiter is a reader waiting for n bytes of a budget: ready is closed once they are counted for it.
type roomWaiter struct {
	n     int64
	ready chan struct{}
}

func (b *inboundBudget) limitTo(n int64) { b.limit = n }
func (b *inboundBudget) joined() *int    { return &b.conns }

// reserve counts n bytes if they fit within the limit, and returns nil; else it counts nothing and returns a channel
// closed once a release has counted the n bytes for it (grant), the caller's then, unless it gives them up first
// (abandon).
func (b *inboundBudget) reserve(n int64) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n <= b.limit {
		b.used += n
		return nil
	}
	w := &roomWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	return w.ready
}

// abandon ends the wait of room, a channel of reserve for n bytes, that its reader gives up: it no longer waits, or,
// when a release counted them for it meanwhile, gives them back.
func (b *inboundBudget) abandon(room <-chan struct{}, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	i := slices.IndexFunc(b.waiters, func(w *roomWaiter) bool { return w.ready == room })
	if i >= 0 {
		b.waiters = slices.Delete(b.waiters, i, i+1)
		return
	}
	b.giveBack(n) // counted for the reader before it gave up: given back as by a release
}

// add counts n bytes whatever the limit: those a connection holds as it joins the budget (inboundShare.share).
func (b *inboundBudget) add(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used += n
}

// release gives back n bytes, counted for the readers waiting that they serve (grant).
func (b *inboundBudget) release(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.giveBack(n)
}

// giveBack is release with b.mu held: what a release and an abandoned wait that was granted its bytes (abandon) both
// do, so that the two give bytes back alike.
func (b *inboundBudget) giveBack(n int64) {
	b.used -= n
	b.grant()
}

// grant counts the room left for each reader waiting that it fits, in the order they came, and wakes those alone;
// the others wait on, not woken to try the budget in vain. NB: first fit, not first come first served: a reader
// waiting for more than is left does not hold back the later ones the room fits, nor a line that comes later
// (reserve). A reader holds none of a budget while it waits (takeAll), and served strictly in turn it would hold
// all that is left, kept from every other client until the room it waits for came or its wait ended: a client
// could keep the budget's room from the others with one large chunk waiting, without holding a byte. So a reader
// waiting for a large chunk (up to half a frame) may see smaller ones served before it, until its wait ends.
func (b *inboundBudget) grant() {
	kept := b.waiters[:0]
	for _, w := range b.waiters {
		if b.used+w.n > b.limit {
			kept = append(kept, w)
			continue
		}
		b.used += w.n
		close(w.ready)
	}
	clear(b.waiters[len(kept):])
	b.waiters = kept
}

// inUse is the bytes held against the budget.
func (b *inboundBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// takeAll reserves n bytes of every budget of bs (nil entries ignored) or of none, waiting for room up to wait, and
// says how it ended: taken, or not (noRoom, ended by done, or clientGone once watch's channel is closed; watch, when
// not nil, is called as the wait begins, to watch for the client's close). NB: all or none: a reader waiting for its
// run's room holds none of the daemon's meanwhile, which would be to hold capacity the others need while it waits
// for its own. The narrowest budget is tried first (the last of bs), so that a reader its own share holds back does
// not take the daemon's bytes even for a moment; one a release served bytes of a wider budget holds them only as it
// tries the others.
func takeAll(bs []*inboundBudget, n int64, done <-chan struct{}, wait time.Duration,
	watch func() <-chan struct{}) takeEnd {
	var (
		timeout <-chan time.Time
		gone    <-chan struct{}
		served  *inboundBudget // the budget whose release counted n bytes for the reader
	)
	for {
		b, room := reserveAll(bs, n, served)
		if room == nil {
			return taken
		}
		if timeout == nil {
			if wait <= 0 {
				b.abandon(room, n)
				return noRoom
			}
			t := time.NewTimer(wait)
			defer t.Stop()
			timeout = t.C
			if watch != nil {
				gone = watch()
			}
		}
		served = nil
		select {
		case <-room:
			served = b
		case <-done:
			b.abandon(room, n)
			return ended
		case <-gone:
			b.abandon(room, n)
			return clientGone
		case <-timeout:
			b.abandon(room, n)
			return noRoom
		}
	}
}

// takeEnd is how takeAll ended.
type takeEnd int

const (
	taken      takeEnd = iota
	noRoom             // no room in time
	ended              // the connection was closed
	clientGone         // its client closed its end
)

// reserveAll reserves n bytes of every budget of bs, narrowest (last) first, but served, whose bytes are counted
// already, and returns nil; else it gives back what it reserved, served's included, and returns the budget that had
// no room and the room it waits for there (reserve).
func reserveAll(bs []*inboundBudget, n int64, served *inboundBudget) (*inboundBudget, <-chan struct{}) {
	for i := len(bs) - 1; i >= 0; i-- {
		if bs[i] == nil || bs[i] == served {
			continue
		}
		if room := bs[i].reserve(n); room != nil {
			for _, b := range bs[i+1:] {
				if b != nil && b != served {
					b.release(n)
				}
			}
			if served != nil {
				served.release(n)
			}
			return bs[i], room
		}
	}
	return nil, nil
}

// releaseAll gives back n bytes to every budget of bs (nil entries ignored).
func releaseAll(bs []*inboundBudget, n int64) {
	for _, b := range bs {
		if b != nil {
			b.release(n)
		}
	}
}

// inboundShare is one connection's reader's side of the inbound budgets, the wire.SpillBudget of its reader: it
// counts against the daemon's from the start, and against the one of the connections before their hello until its
// bind (leave), then (share) against its credential's, but the admin's, and a worker's against its run's, as the
// outbound budget does. The admin is the operator's: its lines count against the daemon's budget alone, where the
// others' shares leave it room (it takes sixteen credentials, or four runs, to hold the whole). Its reader waits for
// room for wait at most, and before its hello not past the hello's deadline; the connection's close ends the wait at
// once, and gives back whatever the reader still holds, once, to each budget: the reader, whose line ends as its
// socket is closed, then gives back nothing more. The client's close ends the wait at once too (hangupWatch), and
// then the connection.
type inboundShare struct {
	done  <-chan struct{}
	nc    *net.UnixConn // watched for its client's close while the reader waits for room (hangupWatch); nil: not
	wait  time.Duration
	until time.Time // the hello's deadline; zero after it (reader only)

	mu sync.Mutex
	// budgets are what held counts against: the daemon's, then, before its bind, that of the connections before
	// their hello, and from its bind its credential's (none for the admin) and its run's (a worker's only). nil
	// after the last.
	budgets [maxBudgets]*inboundBudget
	held    int64
	closed  bool
	gone    bool // the last Take was refused as the client closed its end (clientGone)
}

// Take implements wire.SpillBudget.
func (s *inboundShare) Take(n int) bool {
	wait := s.wait
	if !s.until.IsZero() {
		wait = min(wait, time.Until(s.until))
	}
	s.mu.Lock()
	// NB: a copy: share, which changes them, is called by the reader between two lines, never during a Take; leave
	// may be, and the end of the Take sees to it.
	budgets, closed := s.budgets, s.closed
	s.mu.Unlock()
	if closed {
		return false
	}
	var hangup *hangupWatch
	watch := func() <-chan struct{} {
		if s.nc == nil {
			return nil
		}
		hangup = watchHangup(s.nc)
		return hangup.gone
	}
	end := takeAll(budgets[:], int64(n), s.done, wait, watch)
	if hangup != nil {
		hangup.stop(s.until) // NB: before the reader reads its socket again
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gone = end == clientGone
	if end != taken {
		return false
	}
	if s.closed {
		releaseAll(budgets[:], int64(n))
		return false
	}
	for _, b := range budgets {
		if b != nil && !slices.Contains(s.budgets[:], b) {
			b.release(int64(n)) // NB: left meanwhile (leave): what it took of it is not held against it
		}
	}
	s.held += int64(n)
	return true
}

// clientGone reports whether the reader's last Take was refused as its client closed its end while it waited.
func (s *inboundShare) clientGone() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gone
}

// Release implements wire.SpillBudget.
func (s *inboundShare) Release(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return // close gave it back
	}
	s.held -= int64(n)
	releaseAll(s.budgets[:], int64(n))
}

// share counts the reader's bytes, from now on and those it holds, against b too: its credential's budget or its
// run's. Called by the reader (its hello's bind), between two lines.
func (s *inboundShare) share(b *inboundBudget) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	for i := range s.budgets {
		if s.budgets[i] == nil {
			s.budgets[i] = b
			b.add(s.held)
			return
		}
	}
	panic("broker: a reader counts against more than maxBudgets budgets")
}

// leave stops counting the reader's bytes against b, giving back those it holds of b: the budget of the connections
// before their hello, which it leaves at its bind (the reader, between two lines), and its credential's and its run's,
// which it leaves as its credential ends (Server.giveBackEnded, while the reader may be in a Take, which then gives
// back what it took of b). Nothing to do for a budget it does not count against.
func (s *inboundShare) leave(b *inboundBudget) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.Index(s.budgets[:], b)
	if b == nil || s.closed || i < 0 {
		return
	}
	if s.held > 0 {
		b.release(s.held)
	}
	// NB: the others move up, so that share fills the first free place and the narrowest stays the last.
	copy(s.budgets[i:], s.budgets[i+1:])
	s.budgets[len(s.budgets)-1] = nil
}

// close gives back what the reader holds, and refuses it any more.
func (s *inboundShare) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	if s.held > 0 {
		releaseAll(s.budgets[:], s.held)
		s.held = 0
	}
}
