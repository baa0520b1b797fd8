package httpapi

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// A request held long — a stream, a read waiting out its credential's pacing or for its turn, a rebuild waiting for
// the slot or folding — must end when its client goes, or it holds for nobody what its credential, or every
// credential, has a bounded number of: a stream's place, a read's turn, the rebuild slot, a connection's place.
//
// NB: net/http learns that a client went only by its background read of the connection, which it stops at the
// first byte it reads while a request is in progress (a pipelined request: it then neither ends the request's
// context nor reads further until the answer is written), and which it does not start while a request's body is
// unread. So a client that sent one more byte behind a GET, then closed, had the GET's context end only at its next
// failed write: a stream's keep-alive (15 s), never for a read or a rebuild that writes nothing until it ends.
//
// So each request of Listen's server is given a watch (watchable), which a request held long starts (holdLong)
// before its answer's header: its connection closes after the answer, refusing any request pipelined behind it
// (browsers do not pipeline; its client sends it again), and the watch reads the connection itself, dropping what
// comes, and ends the request's context when the client goes. A request with a body starts it at once
// (unreadbody.go).

// clientWatchKey is the request context's key of its clientWatch.
type clientWatchKey struct{}

// clientWatch is one request's watch of its connection, started at most once, by the request's own goroutine.
type clientWatch struct {
	w       *deadlineWriter
	conn    net.Conn
	cancel  context.CancelFunc // ends the request's context
	started bool
	stopped atomic.Bool   // the request has ended: what the watch's read meets is no client's going
	watched chan struct{} // closed when the watch's read has returned
}

// watchable returns r with a context that its watch ends when its client goes, once started (holdLong), and the
// function that ends the watch, to call before the handler returns. r as it is, and a stop that does nothing, when
// r did not come through Listen's server (a test's): there is no connection to watch.
func watchable(w *deadlineWriter, r *http.Request) (*http.Request, func()) {
	c, ok := r.Context().Value(connKey{}).(net.Conn)
	if !ok {
		return r, func() {}
	}
	ctx, cancel := context.WithCancel(r.Context())
	cw := &clientWatch{w: w, conn: c, cancel: cancel}
	return r.WithContext(context.WithValue(ctx, clientWatchKey{}, cw)), cw.stop
}

// holdLong starts the watch of the request of ctx, if not started yet (watchable), before it waits or works for
// long: the request's context then ends when its client goes, pipelined bytes or not, and its connection closes
// after its answer. False when there is no watch to start: a test's server, or an answer whose header is out already,
// which could no longer say that the connection closes.
func holdLong(ctx context.Context) bool {
	cw, ok := ctx.Value(clientWatchKey{}).(*clientWatch)
	if !ok {
		return false
	}
	if cw.started {
		return true
	}
	if cw.w.headerOut {
		return false
	}
	cw.started = true
	cw.watched = make(chan struct{})
	cw.w.Header().Set("Connection", "close")
	_ = cw.conn.SetReadDeadline(time.Time{}) // NB: net/http's, after the header, is none already (ReadTimeout is 0)
	go cw.watch()
	return true
}

// watch reads the connection until the client goes or sends more than maxUnreadBody (it is then taken as gone:
// the server does not read for it as fast as it sends, where unread bytes stop it at its socket's buffer), or until
// stop, and ends the request's context unless the request ended first.
func (cw *clientWatch) watch() {
	defer close(cw.watched)
	buf := make([]byte, 4<<10)
	for n := 0; n < maxUnreadBody; {
		k, err := cw.conn.Read(buf)
		n += k
		if err != nil {
			break
		}
	}
	if !cw.stopped.Load() {
		cw.cancel()
	}
}

// stop ends the watch, once its request's handler is done: net/http reads nothing more of the connection before it
// closes it.
func (cw *clientWatch) stop() {
	if cw.started {
		cw.stopped.Store(true)
		_ = cw.conn.SetReadDeadline(time.Now()) // NB: ends the watch's read, and net/http's after the answer
		<-cw.watched
	}
	cw.cancel()
}
