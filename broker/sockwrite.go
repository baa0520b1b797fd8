package broker

import (
	"net"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// socketWriter writes a connection's frames: first in one write that never waits and needs no deadline, then,
// for whatever the socket did not take at once, in a write under the connection's write deadline.
//
// Why: a frame almost always fits in the socket's send buffer, and arming the deadline (a timer update under the
// poller's lock) before every answer cost a fifth of what writing it did. A write that would block still gets
// the full writeTimeout from the moment it would block, so a client that stops reading is cut off as before.
//
// Concurrency: one goroutine at a time writes a connection (outbound's claim and its writer): the fields below
// are that goroutine's while it writes.
type socketWriter struct {
	nc      *net.UnixConn
	raw     syscall.RawConn
	timeout time.Duration

	pending []byte // the frame the write in progress is writing
	n       int    // how much of it the socket took at once
	err     error  // why that write failed, other than that the socket is full
	attempt func(fd uintptr) bool
}

// newSocketWriter writes nc, an open connection (accepted, or one end of a pair).
func newSocketWriter(nc *net.UnixConn, timeout time.Duration) *socketWriter {
	// NB: UnixConn.SyscallConn fails only for a nil connection or one without a descriptor (net's conn.ok), which
	// nothing accepted or dialled is; a connection closed since still has one, and its raw writes fail as its
	// writes would. So every connection has a raw writer, and there is no path that writes only under the deadline.
	raw, _ := nc.SyscallConn()
	w := &socketWriter{nc: nc, raw: raw, timeout: timeout}
	w.attempt = w.writeOnce // NB: made once: a method value passed to RawConn.Write would be allocated per write
	return w
}

// write writes frame whole, or fails with the socket's error (os.ErrDeadlineExceeded for a client that did not
// read for timeout).
func (w *socketWriter) write(frame []byte) error {
	w.pending, w.n, w.err = frame, 0, nil
	if err := w.raw.Write(w.attempt); err != nil {
		return err
	}
	n, err := w.n, w.err
	w.pending, w.err = nil, nil
	if err != nil {
		return err
	}
	frame = frame[n:]
	if len(frame) == 0 {
		return nil
	}
	return w.underDeadline(func() error { _, err := w.nc.Write(frame); return err })
}

// writeBatch writes frames whole, under the deadline, or fails as write does.
func (w *socketWriter) writeBatch(frames [][]byte) error {
	if len(frames) == 1 {
		return w.write(frames[0])
	}
	return w.underDeadline(func() error { bufs := net.Buffers(frames); _, err := bufs.WriteTo(w.nc); return err })
}

// underDeadline runs write with the write deadline armed, and disarms it after: a deadline left behind would fail
// the next write that never waits once it passed (the poller checks it before every write).
func (w *socketWriter) underDeadline(write func() error) error {
	w.nc.SetWriteDeadline(time.Now().Add(w.timeout))
	err := write()
	if err == nil {
		err = w.nc.SetWriteDeadline(time.Time{})
	}
	return err
}

// writeOnce writes what the socket takes of pending without waiting; it always reports true, so that RawConn.Write
// never waits for the socket either: the rest goes through the connection's deadline.
func (w *socketWriter) writeOnce(fd uintptr) bool {
	for w.n < len(w.pending) {
		n, err := unix.Write(int(fd), w.pending[w.n:])
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return true
		case err != nil:
			w.err = os.NewSyscallError("write", err)
			return true
		case n <= 0:
			return true
		}
		w.n += n
	}
	return true
}
