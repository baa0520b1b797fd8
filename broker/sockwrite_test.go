package broker

import (
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/brokertest"
)

// socketPair is a connected pair of unix sockets: the broker's end and the client's.
func socketPair(t *testing.T) (broker, client *net.UnixConn) {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(brokertest.SocketDir(t), "s"), Net: "unix"})
	require.NoError(t, err)
	defer ln.Close()
	client, err = net.DialUnix("unix", nil, ln.Addr().(*net.UnixAddr))
	require.NoError(t, err)
	broker, err = ln.AcceptUnix()
	require.NoError(t, err)
	t.Cleanup(func() { broker.Close(); client.Close() })
	return broker, client
}

// TestSocketWriterLeavesNoDeadlineBehind: a write that had to wait for the client (under the deadline) does not
// leave its deadline armed, so a later write that never waits still succeeds once that deadline has passed.
func TestSocketWriterLeavesNoDeadlineBehind(t *testing.T) {
	// NB: long enough for the client to read big under the race detector on a loaded machine: the test fails when
	// it does not.
	const timeout = time.Second
	b, c := socketPair(t)
	w := newSocketWriter(b, timeout)
	big := make([]byte, 1<<20) // more than the socket buffers hold: the write waits for the client to read
	wrote := make(chan error, 1)
	go func() {
		err := w.write(big)
		if err != nil {
			c.Close() // the read below would wait forever for the rest
		}
		wrote <- err
	}()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(guard)))
	_, rerr := io.ReadFull(c, make([]byte, len(big)))
	require.NoError(t, recv(t, wrote, "return from the write"), "the client read all of it, but more slowly than the write's timeout")
	require.NoError(t, rerr)

	time.Sleep(timeout + 100*time.Millisecond) // past the deadline the long write armed: the point of the test
	require.NoError(t, w.write([]byte("{}\n")))
	require.NoError(t, w.writeBatch([][]byte{[]byte("{}\n"), []byte("{}\n")}))
	require.NoError(t, w.write([]byte("{}\n")))
	got := make([]byte, 9)
	_, err := io.ReadFull(c, got)
	require.NoError(t, err)
	require.Equal(t, "{}\n{}\n{}\n", string(got))
}

// TestSocketWriterTimesOutOnAClientThatDoesNotRead: a write the client never reads fails with the deadline's
// error after the timeout, which the connection reports as a slow consumer.
func TestSocketWriterTimesOutOnAClientThatDoesNotRead(t *testing.T) {
	b, _ := socketPair(t)
	w := newSocketWriter(b, 100*time.Millisecond)
	err := w.write(make([]byte, 8<<20))
	require.Equal(t, reasonSlowConsumer, writeFailure(err), "%v", err)
}

// TestSocketWriterAlwaysHasARawWriter: every connection the broker writes (accepted, dialled, even closed since)
// has a raw writer, so the write that never waits is always tried first and no write goes only under the deadline.
func TestSocketWriterAlwaysHasARawWriter(t *testing.T) {
	b, c := socketPair(t)
	require.NotNil(t, newSocketWriter(b, time.Second).raw)
	require.NotNil(t, newSocketWriter(c, time.Second).raw)
	require.NoError(t, b.Close())
	w := newSocketWriter(b, time.Second)
	require.NotNil(t, w.raw)
	require.ErrorIs(t, w.write([]byte("{}\n")), net.ErrClosed)
}
