package httpapi

import (
	"io"
	"net/http"
	"time"
)

// The http.Server has no WriteTimeout: it would bound a whole answer, and a stream lasts as long as its client
// reads it. So every answer's writes get deadlines of their own, here, and a client that stops reading one is
// gone within writeTimeout: its handler's write fails, the request ends (a read gives its turn to the next) and
// net/http closes the connection (its place in the listener is free).
const (
	// writeTimeout bounds how long a client may take to read writePieceBytes of an answer, or one write of a
	// stream (stream.go).
	writeTimeout = 10 * time.Second
	// writePieceBytes is what one deadline covers of an answer: a 4 MiB page is given 16 of them, one after the
	// other, so a slow client that reads is served and one that reads nothing holds nothing for longer than
	// writeTimeout. As much as a stream's batch.
	writePieceBytes = streamBatchBytes
)

// The read side's deadlines are net/http's own (Listen): they bound what a connection holds of its place in the
// listener without a request in progress, before the listener has to make room for another (limitlistener.go).
const (
	// readHeaderTimeout bounds how long a client may take to send a request's line and headers, from when the
	// server starts reading them (once it took the connection, or once the request's first bytes came on a
	// kept-alive one): a client that sends its header a byte at a time holds its connection no longer.
	readHeaderTimeout = 10 * time.Second
	// idleTimeout bounds how long a kept-alive connection may wait for its next request before the server closes it.
	idleTimeout = 2 * time.Minute
)

// deadlineWriter is every request's http.ResponseWriter: each piece of writePieceBytes it writes, and its header,
// must reach the client within timeout of the piece's start. A handler that waits (for its read turn, for a
// rebuild) before it answers is not timed while it waits: the deadline starts with the answer's first byte.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	left    int // bytes the current deadline still covers; 0: the next byte gets a new one
	// headerOut is set once the answer's header is written: a header set after it is not sent (holdLong).
	headerOut bool
}

// withDeadlines wraps w. Its first deadline also replaces the one the connection's previous answer left, which
// may have passed while the connection was idle: an answer written by net/http itself (a header alone) gets it.
func (s *Server) withDeadlines(w http.ResponseWriter) *deadlineWriter {
	d := &deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w), timeout: s.writeTimeout}
	_ = d.rc.SetWriteDeadline(time.Now().Add(d.timeout)) // NB: not supported by a test's recorder: no deadline
	return d
}

// SetWriteDeadline sets the connection's write deadline (a stream's, before each of its writes) and starts a new
// piece: http.ResponseController finds it before the writer it wraps.
func (d *deadlineWriter) SetWriteDeadline(t time.Time) error {
	d.left = writePieceBytes
	return d.rc.SetWriteDeadline(t)
}

func (d *deadlineWriter) renew() { _ = d.SetWriteDeadline(time.Now().Add(d.timeout)) }

func (d *deadlineWriter) WriteHeader(status int) {
	d.headerOut = true
	d.renew()
	d.ResponseWriter.WriteHeader(status)
}

// Write writes b in pieces of at most writePieceBytes, each under a deadline of its own.
func (d *deadlineWriter) Write(b []byte) (int, error) {
	d.headerOut = true
	if len(b) == 0 {
		return d.ResponseWriter.Write(b)
	}
	n := 0
	for len(b) > 0 {
		if d.left == 0 {
			d.renew()
		}
		k := min(len(b), d.left)
		m, err := d.ResponseWriter.Write(b[:k])
		n, d.left, b = n+m, d.left-m, b[m:]
		if err != nil {
			return n, err
		}
		if m < k {
			return n, io.ErrShortWrite
		}
	}
	return n, nil
}

// Flush is http.Flusher's (the stream asserts it); FlushError and Unwrap are what http.ResponseController uses.
func (d *deadlineWriter) Flush()                      { _ = d.FlushError() }
func (d *deadlineWriter) FlushError() error           { return d.rc.Flush() }
func (d *deadlineWriter) Unwrap() http.ResponseWriter { return d.ResponseWriter }
