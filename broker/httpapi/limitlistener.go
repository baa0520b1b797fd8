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
// request in progress holds none of what a credential has a bounded number of (http.StateActive, not kept: a
// request without a valid credential, or one answered at once). A connection whose request keeps its place (keep:
// a stream, a read in progress or waiting its turn) or hijacked is never closed to make room; when every place
// holds one, Accept waits for a place, as the kernel's backlog would.
//
// The states come from the http.Server's ConnState hook (connState), and what a request holds from the handler
// (keepPlace). A connection whose server does not report its states is never chosen: the listener then only waits,
// as it did before it made room.
//
// Cost: each state change moves the connection between three intrusive lists (idle, by when it went idle; new, by
// when the server took it; active and not kept, by when its request came or gave up what it held), O(1) under one
// mutex; choosing whom to close reads the head of each list, O(1). No scan.
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
	busy    connList      // StateActive connections whose request keeps no place, the oldest first
	changed chan struct{} // closed at the next change a waiting Accept may use; nil while none waits
	closed  bool

	evictedIdle atomic.Uint64 // connections closed to make room, by their state then
	evictedNew  atomic.Uint64
	evictedBusy atomic.Uint64
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
				l.evictedBusy.Add(1)
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

// victim is the connection to close to make room, or nil and, when a new or active connection not kept will become
// old enough, how long until it does.
func (l *limitListener) victim(now time.Time) (*limitConn, time.Duration) {
	if c := l.idle.head; c != nil {
		return c, 0
	}
	c := l.fresh.head
	if b := l.busy.head; c == nil || b != nil && b.since.Before(c.since) {
		c = b
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
		l.list(c, &l.fresh)
	case http.StateIdle:
		l.list(c, &l.idle)
	case http.StateActive:
		// NB: a request answered at once (a 401, a page's file, a 405 or a 429) has its answer's write held as long
		// as its client does not read it (up to the write deadline, deadlines.go); a client that pipelines such
		// requests and reads none would hold its place that long, every place with enough connections, with no
		// credential or with one whose bounds it escapes so. Unless the request keeps its place (keep), its
		// connection may be closed to make room like a new one.
		l.list(c, &l.busy)
	default:
		// StateHijacked: never closed to make room. StateClosed: Close gave its place back.
		return
	}
	l.signal()
}

// keep keeps c's place while its request holds what keeps it, until letGo.
func (l *limitListener) keep(c *limitConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.list == &l.busy {
		l.unlist(c)
	}
}

// letGo ends keep: c's request no longer holds anything that keeps its place, and its connection may be closed to
// make room once it is older than the grace from now.
func (l *limitListener) letGo(c *limitConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !c.released && c.list == nil {
		l.list(c, &l.busy)
		l.signal()
	}
}

// list files c in q from now. Under l.mu.
func (l *limitListener) list(c *limitConn, q *connList) {
	c.since = l.now()
	q.push(c)
	c.list = q
}

// connKey is the request context's key of the connection the request came on (Listen's http.Server.ConnContext).
type connKey struct{}

// keepPlace keeps the place of the connection r came on (when Listen's listener accepted it) while r holds what one
// credential has a bounded number of, a read's turn (in progress or waited for) or a stream, so that however many
// connections a credential opens it keeps no more places than its bounds allow; the function returned is letGo,
// for a request that gives that up and goes on writing an answer.
func keepPlace(r *http.Request) (letGo func()) {
	c, ok := r.Context().Value(connKey{}).(*limitConn)
	if !ok {
		return func() {}
	}
	c.l.keep(c)
	return func() { c.l.letGo(c) }
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
	list       *connList // the list it is in: l.idle, l.fresh, l.busy or none
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
