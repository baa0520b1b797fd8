package broker

import (
	"sync"
	"time"
)

// inboundBudget counts the bytes every connection's reader holds in a line longer than its read-ahead (the chunks
// wire.Reader spills it into) against GlobalInboundBytes. A reader finds room or waits for it (taking nothing from
// the socket meanwhile, so its client is held back by its own socket's buffer), for writeTimeout at most, then its
// connection is closed as for a line over the cap. Without it, every connection could hold a frame's worth of a line
// it never ends: (MaxConns+AdminConns) × MaxFrame, over 1 GiB at the defaults, and indefinitely on a connection with
// a subscription, which is never idle.
//
// NB: no deadline for ending a line begun. Memory is bounded by the budget alone, and a deadline would not free the
// budget from a client that means to hold it: closed at the deadline, it dials again and sends another line, for
// the pace of a hello and of a line's bytes, well within a credential's rate. Before its hello a connection's line
// ends with the hello's deadline anyway. What a deadline cannot give, a share of the budget per credential or run
// as the outbound budget has, this does not give either: the connections of one credential (or a run's workers)
// can hold all of it, and the others' lines longer than the read-ahead then wait, and close, until they end theirs.
//
// Concurrency: every method is safe for concurrent use.
type inboundBudget struct {
	mu    sync.Mutex
	used  int64
	limit int64
	room  chan struct{} // made by a reader waiting for room, closed (and dropped) when bytes are given back
}

// take reserves n bytes, waiting for room up to wait; false when there was none in time, or done was closed first.
func (b *inboundBudget) take(n int64, done <-chan struct{}, wait time.Duration) bool {
	var timeout <-chan time.Time
	for {
		b.mu.Lock()
		if b.used+n <= b.limit {
			b.used += n
			b.mu.Unlock()
			return true
		}
		if b.room == nil {
			b.room = make(chan struct{})
		}
		room := b.room
		b.mu.Unlock()
		if timeout == nil {
			if wait <= 0 {
				return false
			}
			t := time.NewTimer(wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-room:
		case <-done:
			return false
		case <-timeout:
			return false
		}
	}
}

// release gives back n bytes and wakes the readers waiting for room.
func (b *inboundBudget) release(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if b.room != nil {
		close(b.room)
		b.room = nil
	}
}

// inUse is the bytes held by every reader together.
func (b *inboundBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// inboundShare is one connection's reader's side of the server's inboundBudget, the wire.SpillBudget of its reader.
// Its reader waits for room for wait at most, and before its hello not past the hello's deadline; the connection's
// close ends the wait at once, and gives back whatever the reader still holds, once: the reader, whose line ends
// as its socket is closed, then gives back nothing more.
type inboundShare struct {
	b     *inboundBudget
	done  <-chan struct{}
	wait  time.Duration
	until time.Time // the hello's deadline; zero after it (reader only)

	mu     sync.Mutex
	held   int64
	closed bool
}

// Take implements wire.SpillBudget.
func (s *inboundShare) Take(n int) bool {
	wait := s.wait
	if !s.until.IsZero() {
		wait = min(wait, time.Until(s.until))
	}
	if !s.b.take(int64(n), s.done, wait) {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		s.b.release(int64(n))
		return false
	}
	s.held += int64(n)
	return true
}

// Release implements wire.SpillBudget.
func (s *inboundShare) Release(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return // close gave it back
	}
	s.held -= int64(n)
	s.b.release(int64(n))
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
		s.b.release(s.held)
		s.held = 0
	}
}
