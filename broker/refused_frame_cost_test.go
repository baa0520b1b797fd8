package broker

import (
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
)

// TestFramesRefusedAfterHelloCostTheirBytes: an authenticated connection's line that is malformed, over the cap or
// cut off by the end of its stream closes the connection without a frame, and costs its credential what a request
// of its bytes does, as such a line before a hello costs its process. Until it did, it cost nothing: a token that
// dialled in a loop had a frame of up to MaxFrame read and parsed for each hello's units alone, more than twice the
// bytes per unit its requests get.
func TestFramesRefusedAfterHelloCostTheirBytes(t *testing.T) {
	pad := strings.Repeat("x", 100<<10)
	for name, tc := range map[string]struct {
		sent  string
		cut   bool // the stream ends after it
		bytes int  // what it takes of the stream, as the server reads it
	}{
		"malformed": {sent: `{"id":"p","method":"ping","params":{"x":"` + pad + `"}` + "\n"},
		"over the cap": {
			sent:  `{"id":"p","method":"ping","params":{"x":"` + pad + pad + pad + `"}}` + "\n",
			bytes: wire.DefaultMaxFrame,
		},
		"truncated": {sent: `{"id":"p","method":"ping","params":{"x":"` + pad + `"}}`, cut: true},
	} {
		t.Run(name, func(t *testing.T) {
			_, clock, w := pacedWorker(t)
			before := clock.level(workerKey(taskP))
			w.nc.Write([]byte(tc.sent)) // NB: the server may close before it has read it all
			if tc.cut {
				require.NoError(t, w.nc.(*net.UnixConn).CloseWrite())
			}
			w.closed()
			bytes := tc.bytes
			if bytes == 0 {
				bytes = len(tc.sent)
			}
			require.Equal(t, float64(requestCost(bytes)), before-clock.level(workerKey(taskP)))
		})
	}
}

// TestALineCutByAResetCostsItsBytes: a client that closes its socket with an answer of the broker unread ends its
// stream with a reset (ECONNRESET), not an end of file, after the broker has read every byte it sent. A line cut off
// so costs its credential what a line cut off by an end of file does, a request of its bytes: it cost nothing, so
// a token dialling in a loop that left its answers unread had up to a frame read per connection for its hello's
// units alone.
func TestALineCutByAResetCostsItsBytes(t *testing.T) {
	f, clock, w := pacedWorker(t)
	w.sendLine(`{"id":"p","method":"ping","params":null}`)
	awaitUnread(t, w.nc.(*net.UnixConn)) // the ping's answer, left unread: the close resets the stream
	before := clock.level(workerKey(taskP))
	cut := `{"id":"q","method":"ping","params":{"x":"` + strings.Repeat("x", 100<<10)
	_, err := w.nc.Write([]byte(cut))
	require.NoError(t, err)
	require.NoError(t, w.nc.Close())
	f.awaitConns(0)
	require.Equal(t, float64(requestCost(len(cut))), before-clock.level(workerKey(taskP)))
}

// TestBlankLinesAStreamEndsWithCostTheirBytes: blank lines are read (and skipped) as a frame's bytes are, and cost
// a request's bytes when a frame follows them; the ones an authenticated connection's stream ends with, by an end of
// file or a reset, cost their bytes too. They cost nothing, so a token dialling in a loop had up to a frame of blank
// lines, each a line read and skipped, read per connection for its hello's units alone.
func TestBlankLinesAStreamEndsWithCostTheirBytes(t *testing.T) {
	blank := strings.Repeat("\n", 100<<10)
	for name, reset := range map[string]bool{"end of file": false, "reset": true} {
		t.Run(name, func(t *testing.T) {
			f, clock, w := pacedWorker(t)
			if reset {
				w.sendLine(`{"id":"p","method":"ping","params":null}`)
				awaitUnread(t, w.nc.(*net.UnixConn)) // the ping's answer, left unread: the close resets the stream
			}
			before := clock.level(workerKey(taskP))
			_, err := w.nc.Write([]byte(blank))
			require.NoError(t, err)
			require.NoError(t, w.nc.Close())
			f.awaitConns(0)
			require.Equal(t, float64(len(blank)/frameUnit), before-clock.level(workerKey(taskP)))
		})
	}
}

// pacedWorker is a fixture whose credentials are paced on a frozen clock, every bucket full, and a worker connection
// of it past its hello.
func pacedWorker(t *testing.T) (*fixture, *pacerClock, *client) {
	f := newFixture(t, fixtureOpts{opts: Options{RatePerCredential: 1, BurstPerCredential: 1 << 20}})
	clock := installPacerClock(f)
	s := f.seed()
	clock.freeze()
	w := f.dial()
	w.hello(runR, taskP, s.p)
	return f, clock, w
}

// awaitUnread returns once nc has bytes to read, reading none of them.
func awaitUnread(t *testing.T, nc *net.UnixConn) {
	rc, err := nc.SyscallConn()
	require.NoError(t, err)
	var peekErr error
	require.NoError(t, nc.SetReadDeadline(time.Now().Add(guard))) // the raw read waits no longer than a read would
	require.NoError(t, rc.Read(func(fd uintptr) bool {
		var b [1]byte
		_, _, peekErr = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK)
		return peekErr != syscall.EAGAIN
	}), "no bytes to read within %s", guard)
	require.NoError(t, peekErr)
}
