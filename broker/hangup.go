package broker

import (
	"errors"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// hangupWatch watches a connection's socket, while its reader reads none of it (a line waiting for inbound room),
// for its client's close: the reader, which would see it only as it read on, would otherwise keep the connection,
// its place and its line's bytes for as long as its wait, after its client is gone.
//
// NB: the close of the client's end (both ways, POLLHUP), not a shutdown of its writes alone: a client that shut
// them after a whole line still reads its answer, and the rest of its line may be in the socket's buffer already.
// The rest of a line the client sent before its close is not read: no answer to it could reach the client.
type hangupWatch struct {
	nc     *net.UnixConn
	gone   chan struct{} // closed when the client has closed its end
	exited chan struct{} // closed when the watch has ended
}

// watchHangup starts watching nc; the reader must stop the watch (stop) before it reads nc again.
func watchHangup(nc *net.UnixConn) *hangupWatch {
	w := &hangupWatch{nc: nc, gone: make(chan struct{}), exited: make(chan struct{})}
	raw, err := nc.SyscallConn()
	if err != nil {
		close(w.exited)
		return w
	}
	go func() {
		defer close(w.exited)
		// NB: the runtime's poller wakes the callback at every event of the socket (data, the peer's close), and
		// Read returns when it reports true, or at the read deadline stop sets, or when nc is closed.
		raw.Read(func(fd uintptr) bool {
			if hungUp(int(fd)) {
				close(w.gone)
				return true
			}
			return false
		})
	}()
	return w
}

// hungUp reports whether the peer of socket fd has closed its end, without waiting.
func hungUp(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return err == nil && n > 0 && fds[0].Revents&(unix.POLLHUP|unix.POLLERR) != 0
	}
}

// aLongTimeAgo is a read deadline in the past: it ends a read waiting at once.
var aLongTimeAgo = time.Unix(1, 0)

// stop ends the watch, and sets the read deadline of the connection back to deadline, the reader's.
func (w *hangupWatch) stop(deadline time.Time) {
	select {
	case <-w.exited:
	default:
		w.nc.SetReadDeadline(aLongTimeAgo)
		<-w.exited
	}
	w.nc.SetReadDeadline(deadline)
}
