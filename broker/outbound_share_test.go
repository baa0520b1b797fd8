package broker

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/crewlog/crewlog/broker/wire"
)

// TestOneCredentialCannotHoldTheGlobalOutboundBudget: a credential whose connections all stop reading holds at most
// its share of the daemon's outbound budget (OutboundBytesPerCredential), so another credential's subscription,
// read as it comes, is not ended with a resync for want of the budget the first one took. Without the share,
// MaxConnsPerCredential connections of OutboundBytes each (64 × 4 MiB by default) could hold all of
// GlobalOutboundBytes (256 MiB) for writeTimeout, and again at each reconnection.
func TestOneCredentialCannotHoldTheGlobalOutboundBudget(t *testing.T) {
	const conns, perConn = 4, 64 << 10
	f := newFixture(t, fixtureOpts{opts: Options{
		MaxFrame: 16 << 10, OutboundQueueCap: 4096, OutboundBytes: perConn, GlobalOutboundBytes: 7 * perConn / 2,
		MaxConnsPerCredential: conns, MaxSubscriptionsPerCredential: conns, RatePerCredential: -1,
	}, write: time.Minute})
	s := f.seed()
	f.streamUsage(t, 10000)
	// P's connections subscribe from the start and read nothing; their sockets take next to nothing, so what the
	// subscriptions pushed stays in the queues until they are full and end.
	var held []*client
	for range conns {
		c := f.dial()
		held = append(held, c)
		c.hello(runR, taskP, s.p)
		sc := f.newestConn(taskP)
		raw, err := sc.nc.SyscallConn()
		require.NoError(t, err)
		require.NoError(t, raw.Control(func(fd uintptr) {
			require.NoError(t, unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, 1))
		}))
		c.ok("events.subscribe", map[string]any{"sinceSeq": 0})
		sc.mu.Lock()
		sub := sc.sub
		sc.mu.Unlock()
		select {
		case <-sub.done:
		case <-time.After(guard):
			t.Fatal("the stalled subscription never ended")
		}
	}
	f.srv.mu.Lock()
	require.LessOrEqual(t, f.srv.credOut[workerKey(taskP)].used.Load(), int64(perConn+conns*(16<<10)),
		"P's connections hold its share, and each one frame beyond it at most")
	f.srv.mu.Unlock()

	// Q reads everything it is sent: fifty events, pushed faster than it reads them one by one.
	q := f.dial()
	q.hello(runR, taskQ, s.q)
	q.ok("events.subscribe", map[string]any{"sinceSeq": 10000 - 50})
	for got := 0; got < 50; got++ {
		fr, err := q.read()
		require.NoError(t, err)
		var ev wire.Event
		require.NoError(t, json.Unmarshal(fr, &ev))
		require.NotEqual(t, wire.EventResync, ev.Name, "Q was resynced after %d events: P holds the daemon's budget", got)
	}

	for _, c := range held {
		c.nc.Close()
	}
	require.Eventually(t, func() bool {
		f.srv.mu.Lock()
		defer f.srv.mu.Unlock()
		_, kept := f.srv.credOut[workerKey(taskP)]
		return !kept
	}, guard, time.Millisecond, "a credential's budget outlives its connections")
}
