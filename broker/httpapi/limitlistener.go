package httpapi

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// limitListener holds at most max connections open at once. When a connection arrives and every place is held, it
// makes room instead of waiting: it closes the connection idle the longest (http.StateIdle, between two requests),
// else the oldest, older than grace, of those that have not sent a complete request (http.StateNew) and those whose
// request in progress did not authenticate (http.StateActive, not vouched for). A connection whose request in
// progress authenticated (vouch: a stream, a read waiting its turn) or hijacked is never closed to make room; when
// every place holds one, Accept waits for a place, as the kernel's backlog would.
//
// The states come from the http.Server's ConnState hook (connState), and a request's authentication from the
// handler (vouch). A connection whose server does not report its states is never chosen: the listener then only
// waits, as it did before it made room.
//
// Cost: each state change moves the connection between three intrusive lists (idle, by when it went idle; new, by
// when the server took it; unauthenticated, by when its request came), O(1) under one mutex; choosing whom to close
// reads the head of each list, O(1). No scan.
//
// Accept takes the next connection from the kernel before it looks for room, so a connection is closed only for
// one that is there; while it waits, it holds that one connection: at most max+1 are open.
type limitListener struct {
	net.Listener
	max   int
	grace time.Duration
	now   func() time.Time
	done  chan struct{}
	once  sync.Once

	mu      sync.Mutex
	held    int           // places held: connections handed out and not closed or evicted, ≤ max
	idle    connList      // StateIdle connections, the longest idle first
	fresh   connList      // StateNew connections, the oldest first
	anon    connList      // StateActive connections whose request has not authenticated, the oldest request first
	changed chan struct{} // closed at the next change a waiting Accept may use; nil while none waits
	closed  bool

	evictedIdle atomic.Uint64 // connections closed to make room, by their state then
	evictedNew  atomic.Uint64
	evictedAnon atomic.Uint64
}

func newLimitListener(l net.Listener, max int, grace time.Duration) *limitListener {
	return &limitListener{Listener: l, max: max, grace: grace, now: time.Now, done: make(chan struct{})}
}

func (l *limitListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	c := &limitConn{Conn: nc, l: l}
	victim, err := l.take()
	if err != nil {
		nc.Close()
		return nil, err
	}
	if victim != nil {
		// The victim's server goroutine sees its reads fail and closes it; its Close then gives back nothing.
		victim.Conn.Close()
	}
	return c, nil
}

// take takes a place for a connection just accepted: a free one, or the place of the connection it returns, which
// the caller closes. It waits while every place holds a connection it may not close.
func (l *limitListener) take() (*limitConn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		if l.closed {
			return nil, net.ErrClosed
		}
		if l.held < l.max {
			l.held++
			return nil, nil
		}
		victim, retry := l.victim(l.now())
		if victim != nil {
			switch victim.list {
			case &l.idle:
				l.evictedIdle.Add(1)
			case &l.fresh:
				l.evictedNew.Add(1)
			default:
				l.evictedAnon.Add(1)
			}
			// The place passes from the victim to the new connection: held does not change.
			victim.released = true
			l.unlist(victim)
			return victim, nil
		}
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		changed := l.changed
		l.mu.Unlock()
		l.wait(changed, retry)
		l.mu.Lock()
	}
}

// wait waits for changed, for retry (if > 0) or for Close.
func (l *limitListener) wait(changed <-chan struct{}, retry time.Duration) {
	var expired <-chan time.Time
	if retry > 0 {
		t := time.NewTimer(retry)
		defer t.Stop()
		expired = t.C
	}
	select {
	case <-changed:
	case <-expired:
	case <-l.done:
	}
}

// victim is the connection to close to make room, or nil and, when a new or unauthenticated connection will become
// old enough, how long until it does.
func (l *limitListener) victim(now time.Time) (*limitConn, time.Duration) {
	if c := l.idle.head; c != nil {
		return c, 0
	}
	c := l.fresh.head
	if a := l.anon.head; c == nil || a != nil && a.since.Before(c.since) {
		c = a
	}
	if c == nil {
		return nil, 0
	}
	if wait := c.since.Add(l.grace).Sub(now); wait > 0 {
		return nil, wait
	}
	return c, 0
}

// connState is the http.Server's ConnState hook: it files each connection by its state.
func (l *limitListener) connState(nc net.Conn, st http.ConnState) {
	c, ok := nc.(*limitConn)
	if !ok || c.l != l {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.released {
		return
	}
	l.unlist(c)
	switch st {
	case http.StateNew:
		c.since = l.now()
		l.fresh.push(c)
		c.list = &l.fresh
	case http.StateIdle:
		c.since = l.now()
		l.idle.push(c)
		c.list = &l.idle
	case http.StateActive:
		// NB: a request without a credential is answered at once, but its answer's write is held as long as its
		// client does not read it (up to the write deadline, deadlines.go); one that pipelines requests and reads
		// none would hold its place that long, every place with enough connections. Until the request
		// authenticates (vouch), its connection may be closed to make room like a new one.
		c.since = l.now()
		l.anon.push(c)
		c.list = &l.anon
	default:
		// StateHijacked: never closed to make room. StateClosed: Close gave its place back.
		return
	}
	l.signal()
}

// vouch keeps c's place while its request is in progress: the request authenticated. Its connection goes back to
// the lists when it next goes idle.
func (l *limitListener) vouch(c *limitConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.list == &l.anon {
		l.unlist(c)
	}
}

// connKey is the request context's key of the connection the request came on (Listen's http.Server.ConnContext).
type connKey struct{}

// vouchFor keeps the place of the connection r came on, when Listen's listener accepted it: r authenticated.
func vouchFor(r *http.Request) {
	if c, ok := r.Context().Value(connKey{}).(*limitConn); ok {
		c.l.vouch(c)
	}
}

// release gives back c's place, once; an evicted connection gave its place to another already.
func (l *limitListener) release(c *limitConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.released {
		return
	}
	c.released = true
	l.unlist(c)
	l.held--
	l.signal()
}

func (l *limitListener) unlist(c *limitConn) {
	if c.list != nil {
		c.list.remove(c)
		c.list = nil
	}
}

// signal wakes the waiting Accept, if any. l.mu is held.
func (l *limitListener) signal() {
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
}

func (l *limitListener) Close() error {
	l.once.Do(func() {
		l.mu.Lock()
		l.closed = true
		l.mu.Unlock()
		close(l.done)
	})
	return l.Listener.Close()
}

// limitConn gives its place back once, at its first Close, unless it was closed to make room.
type limitConn struct {
	net.Conn
	l *limitListener

	// Guarded by l.mu.
	released   bool      // its place was given back or passed to another connection
	list       *connList // the list it is in: l.idle, l.fresh, l.anon or none
	since      time.Time // when it entered list
	prev, next *limitConn
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.l.release(c)
	return err
}

// connList is an intrusive doubly linked list of connections, oldest at head.
type connList struct {
	head, tail *limitConn
	n          int
}

func (q *connList) push(c *limitConn) {
	c.prev, c.next = q.tail, nil
	if q.tail != nil {
		q.tail.next = c
	} else {
		q.head = c
	}
	q.tail = c
	q.n++
}

func (q *connList) remove(c *limitConn) {
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		q.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		q.tail = c.prev
	}
	c.prev, c.next = nil, nil
	q.n--
}
