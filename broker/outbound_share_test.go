package broker

import (
	"encoding/json"
	"sync"
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

// TestUnreadAnswersStayWithinTheBudgets: a credential whose connections all stop reading, each then asking for an
// answer as large as a frame, holds no answer outside its budgets: a connection over its bounds reads no next request
// until its writer has made room, so no answer is rendered to wait there, and what the credential holds stays within
// its share and two frames a connection (the one it took holding nothing, and one answer). Without it, each reader
// rendered its answer and held it, counted by no budget, until its connection closed: MaxConnsPerCredential frames
// of a credential, and (MaxConns+AdminConns) of the daemon, beyond GlobalOutboundBytes. Another credential's
// requests are served meanwhile, and a stalled connection that reads again gets its answer.
func TestUnreadAnswersStayWithinTheBudgets(t *testing.T) {
	const conns, frame, share = 4, 16 << 10, 64 << 10
	f := newFixture(t, fixtureOpts{opts: Options{
		MaxFrame: frame, OutboundQueueCap: 4096, OutboundBytes: share, OutboundBytesPerCredential: share,
		OutboundBytesPerRun: 8 * share, GlobalOutboundBytes: 8 * share, MaxConnsPerCredential: conns,
		MaxSubscriptionsPerCredential: conns, RatePerCredential: -1, RatePerRun: -1,
	}, write: time.Minute})
	s := f.seed()
	f.streamUsage(t, 3000)
	var (
		mu       sync.Mutex
		stalled  = map[*conn]bool{}
		rendered = map[*conn]bool{} // the stalled connections whose events.since answer was rendered
	)
	f.srv.answering = func(c *conn, method string) {
		mu.Lock()
		defer mu.Unlock()
		if stalled[c] && method == wire.MethodEventsSince {
			rendered[c] = true
		}
	}
	var held []*client
	for range conns {
		c := f.dial()
		c.hello(runR, taskP, s.p)
		f.stalledSubscription(c, taskP)
		mu.Lock()
		stalled[f.newestConn(taskP)] = true
		mu.Unlock()
		c.sendLine(`{"id":"since","method":"events.since","params":{"sinceSeq":0,"limit":1000}}`)
		held = append(held, c)
	}
	// A stalled connection ends up with its answer rendered, or with its reader waiting for room before it reads the
	// request. Never with a goroutine waiting for room while its reader serves the request: that is the answer,
	// rendered and held outside every budget.
	for c := range stalled {
		state := func() (waits, serving, answered bool) {
			c.out.mu.Lock()
			waits = c.out.space != nil
			c.out.mu.Unlock()
			c.mu.Lock()
			serving = c.serving
			c.mu.Unlock()
			mu.Lock()
			defer mu.Unlock()
			return waits, serving, rendered[c]
		}
		require.Eventually(t, func() bool { waits, _, answered := state(); return waits || answered }, guard,
			time.Millisecond, "connection %d neither answers nor waits for room", c.seq)
		waits, serving, _ := state()
		require.False(t, waits && serving, "connection %d: its answer waits for room outside every budget", c.seq)
	}
	f.srv.mu.Lock()
	used := f.srv.credOut[workerKey(taskP)].used.Load()
	f.srv.mu.Unlock()
	require.LessOrEqual(t, used, int64(share+conns*2*frame), "P holds more than its share and two frames a connection")

	q := f.dial()
	q.hello(runR, taskQ, s.q)
	require.NotEmpty(t, q.ok("events.since", map[string]any{"sinceSeq": 0, "limit": 1000})["events"],
		"another credential is served while P's connections hold their budget")

	reader := held[0]
	require.NotEmpty(t, reader.result("events.since", reader.answerOf("since"))["events"],
		"a stalled connection that reads again is answered")
	for _, c := range held {
		c.nc.Close()
	}
	require.Eventually(t, func() bool { return f.srv.outBudget.used.Load() == 0 }, guard, time.Millisecond,
		"outbound bytes held after every connection closed")
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
