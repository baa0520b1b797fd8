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
		OutboundBytesPerRun: 7 * perConn / 2, // P and Q are of one run: its share is another test's
	}, write: time.Minute})
	s := f.seed()
	f.streamUsage(t, 10000)
	// P's connections subscribe from the start and read nothing.
	var held []*client
	for range conns {
		c := f.dial()
		held = append(held, c)
		c.hello(runR, taskP, s.p)
		f.stalledSubscription(c, taskP)
	}
	f.srv.mu.Lock()
	require.LessOrEqual(t, f.srv.credOut[workerKey(taskP)].used.Load(), int64(perConn+conns*(16<<10)),
		"P's connections hold its share, and each one frame beyond it at most")
	f.srv.mu.Unlock()

	// Q reads everything it is sent: fifty events, pushed faster than it reads them one by one.
	q := f.dial()
	q.hello(runR, taskQ, s.q)
	q.ok("events.subscribe", map[string]any{"sinceSeq": 10000 - 50})
	q.readsWithoutResync(50, "P holds the daemon's budget")

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

// stalledSubscription subscribes c, task taskID's newest connection, from the start of its run, with a server-side
// socket that takes next to nothing, and returns once the subscription has ended: what it pushed stays in the
// connection's queue, which filled until a budget refused a push and the subscription ended with its resync.
func (f *fixture) stalledSubscription(c *client, taskID string) {
	f.t.Helper()
	sc := f.newestConn(taskID)
	raw, err := sc.nc.SyscallConn()
	require.NoError(f.t, err)
	require.NoError(f.t, raw.Control(func(fd uintptr) {
		require.NoError(f.t, unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, 1))
	}))
	c.ok("events.subscribe", map[string]any{"sinceSeq": 0})
	sc.mu.Lock()
	sub := sc.sub
	sc.mu.Unlock()
	select {
	case <-sub.done:
	case <-time.After(guard):
		f.t.Fatal("the stalled subscription never ended")
	}
}

// readsWithoutResync reads n pushes of c's subscription as they come and requires none of them to be a resync,
// which would say why.
func (c *client) readsWithoutResync(n int, why string) {
	c.t.Helper()
	for got := 0; got < n; got++ {
		fr, err := c.read()
		require.NoError(c.t, err)
		var ev wire.Event
		require.NoError(c.t, json.Unmarshal(fr, &ev))
		require.NotEqual(c.t, wire.EventResync, ev.Name, "resynced after %d events: %s", got, why)
	}
}
