package httpapi

import (
	"net/http"
	"time"
)

// A request with a body: no route reads one, and after the answer net/http would read what is left of it with no
// deadline (ReadTimeout is 0, for the streams' sake), so a client trickling one would keep its connection active
// for as long as it likes. So the request is answered, its body unread by the route, and its connection closed.
//
// NB: net/http learns that a client went only by reading the connection once the request's body has ended (its
// background read): with a body left unread, a request's context never ended when its client went. A stream then
// held its place, and a read its turn, until a write failed, a keep-alive or two later (or never, with no event
// to send), and a rebuild went on folding for nobody. So such a request starts its watch of the connection at once
// (clientwatch.go), which reads it itself, dropping what comes (the body, or requests pipelined behind it, which
// the closing connection would not serve), and ends the request's context when the client goes.

// maxUnreadBody bounds what a request's watch reads and drops of its connection (clientwatch.go): a client that
// sends more to a route that reads none is taken as gone (its request ends), so it cannot have the server read for
// it as fast as it sends, where unread bytes stop it at its socket's buffer.
const maxUnreadBody = 64 << 10

// watchUnreadBody prepares r, which has a body and a watch (watchable), for its handler: its connection closes
// after the answer, and its context also ends when the client goes. Its watch's stop ends the watch, and net/http
// reads nothing more of the connection before it closes it.
func watchUnreadBody(w http.ResponseWriter, r *http.Request) {
	if !holdLong(r.Context()) {
		// Not Listen's server (a test's): no connection to watch, only the read to stop.
		w.Header().Set("Connection", "close")
		_ = http.NewResponseController(w).SetReadDeadline(time.Now())
	}
}
