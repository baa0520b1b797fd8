package httpapi

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// A request with a body: no route reads one, and after the answer net/http would read what is left of it with no
// deadline (ReadTimeout is 0, for the streams' sake), so a client trickling one would keep its connection active
// for as long as it likes. So the request is answered, its body unread by the route, and its connection closed.
//
// NB: net/http learns that a client went only by reading the connection once the request's body has ended (its
// background read): with a body left unread, a request's context never ended when its client went. A stream then
// held its place, and a read its turn, until a write failed, a keep-alive or two later (or never, with no event
// to send), and a rebuild went on folding for nobody. So while such a request is in its handler, watchUnreadBody
// reads the connection itself, dropping what comes (the body, or requests pipelined behind it, which the closing
// connection would not serve), and ends the request's context when the client goes.

// maxUnreadBody bounds what watchUnreadBody reads and drops of one request's connection: a client that sends more
// to a route that reads none is taken as gone (its request ends), so it cannot have the server read for it as fast
// as it sends, where unread bytes stop it at its socket's buffer.
const maxUnreadBody = 64 << 10

// watchUnreadBody prepares r, which has a body, for its handler: its connection closes after the answer, and the
// request returned has a context that also ends when the client goes. Call stop before the handler returns: it
// ends the watch, and net/http reads nothing more of the connection before it closes it.
func watchUnreadBody(w http.ResponseWriter, r *http.Request) (_ *http.Request, stop func()) {
	w.Header().Set("Connection", "close")
	c, ok := r.Context().Value(connKey{}).(net.Conn)
	if !ok {
		// Not Listen's server (a test's): no connection to watch, only the read to stop.
		_ = http.NewResponseController(w).SetReadDeadline(time.Now())
		return r, func() {}
	}
	ctx, cancel := context.WithCancel(r.Context())
	var stopped atomic.Bool
	watched := make(chan struct{})
	_ = c.SetReadDeadline(time.Time{}) // NB: net/http's, after the header, is none already (ReadTimeout is 0)
	go func() {
		defer close(watched)
		buf := make([]byte, 4<<10)
		for n := 0; n < maxUnreadBody; {
			k, err := c.Read(buf)
			n += k
			if err != nil {
				break
			}
		}
		if !stopped.Load() {
			cancel() // the client went, or sent more than a request without a body needs
		}
	}()
	return r.WithContext(ctx), func() {
		stopped.Store(true)
		_ = c.SetReadDeadline(time.Now()) // NB: ends the watch's read, and net/http's of the body after the answer
		<-watched
		cancel()
	}
}
