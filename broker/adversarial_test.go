package broker

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/events"
)

func TestOversizeLineClosesWithoutFrame(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	s := f.seed()
	for _, authed := range []bool{false, true} {
		c := f.dial()
		if authed {
			c.hello(runR, taskP, s.p)
		}
		go c.nc.Write([]byte(strings.Repeat("x", 300*1024) + "\n")) // may fail once the server closes
		c.closed()
	}
	f.dial().helloAdmin()
}

func TestNoHelloClosedAfterTimeout(t *testing.T) {
	const timeout = 50 * time.Millisecond
	f := newFixture(t, fixtureOpts{opts: Options{HelloTimeout: timeout}})
	start := time.Now() // before the dial: the server's deadline starts at accept
	c := f.dial()
	c.closed() // the read blocks until the server closes: a signal, not a sleep
	waited := time.Since(start)
	require.GreaterOrEqual(t, waited, timeout, "closed before the hello deadline")
	requireWithin(t, timeout, waited, 10, "close after the hello deadline")
}

func TestSecondHello(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	s := f.seed()
	c := f.dial()
	c.hello(runR, taskP, s.p)
	e := c.fails("hello", map[string]any{"protocol": 1, "runId": runR, "taskId": taskP, "token": s.p}, wire.CodeProtocol)
	require.Equal(t, wire.MsgHelloCompleted, e.Message)
	c.closed()
}

// TestThousandIdleConnections: 1,000 idle connections (subscribed, with a wait in flight) hold up neither
// another client's pings nor a commit elsewhere, measured against the same client before they connected.
func TestThousandIdleConnections(t *testing.T) {
	f := newFixture(t, fixtureOpts{opts: wideOpen()})
	s := f.seed()
	orch2 := f.seedRun("R2", "T2")
	c := f.dial()
	c.hello(runR, taskQ, s.q)
	o2 := f.dial()
	o2.hello("R2", events.OrchestratorKey, orch2)
	usage := func() time.Duration {
		start := time.Now()
		for i := 0; i < 20; i++ {
			o2.ok("task.usage", map[string]any{"taskId": "T2", "input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0})
		}
		return time.Since(start) / 20
	}
	pingAlone, commitAlone := medianPing(c, 50), usage()

	idle := make([]*client, 1000)
	for i := range idle {
		idle[i] = f.dial()
		idle[i].hello(runR, taskP, s.p)
		idle[i].ok("events.subscribe", map[string]any{"sinceSeq": f.eng.Head()})
		idle[i].sendLine(`{"id":"w","method":"task.waitStatus","params":{"taskId":"Q","until":"completed","timeoutMs":60000}}`)
	}
	require.Equal(t, true, c.ok("ping", nil)["pong"])
	requireWithin(t, pingAlone, medianPing(c, 50), 5, "ping with 1,000 idle connections")
	requireWithin(t, commitAlone, usage(), 5, "a commit of another run with 1,000 idle connections")
	// A message to P fans out to all 1000 of P's connections without holding anything up.
	o := f.dial()
	o.hello(runR, events.OrchestratorKey, s.orch)
	o.ok("msg.send", map[string]any{"to": taskP, "body": "to all of P"})
	for _, ic := range idle[:10] {
		fr, err := ic.read()
		require.NoError(t, err)
		require.Contains(t, string(fr), `"mailbox.message"`)
	}
}

func TestMaxConns(t *testing.T) {
	f := newFixture(t, fixtureOpts{opts: Options{MaxConns: 2}})
	a, b := f.dial(), f.dial()
	a.helloAdmin()
	b.helloAdmin()
	c := f.dial()
	end := c.untilError() // the one frame of a connection over MaxConns: a reason, not a reset
	require.Equal(t, wire.CodeTooManyConnections, end.Error.Code)
	c.closed()
	// The server closes a (second hello); by the time a sees the close, its slot is free.
	a.fails("hello", map[string]any{"protocol": 1, "role": "admin", "token": testAdminToken}, wire.CodeProtocol)
	a.closed()
	d := f.dial()
	d.helloAdmin()
}

// TestSlowSubscriberGetsResync: a subscriber that stops reading while 10,000 events commit gets frames in seq
// order without a gap, then ONE resync naming the first seq it missed; the engine commits as fast as without it
// and another client's pings are as fast as before it (ratios within this run).
func TestSlowSubscriberGetsResync(t *testing.T) {
	f := newFixture(t, fixtureOpts{opts: Options{OutboundQueueCap: 32}, write: time.Minute})
	s := f.seed()
	slow := f.dial()
	slow.hello(runR, taskP, s.p)
	other := f.dial()
	other.hello(runR, taskQ, s.q)
	const n = 10000
	pingAlone, commitAlone := medianPing(other, 20), f.streamUsage(t, n)
	slow.ok("events.subscribe", map[string]any{"sinceSeq": 0}) // then it reads nothing until the stream is in
	commit := f.streamUsage(t, n)
	requireWithin(t, commitAlone, commit, 3, "10,000 commits with a stalled subscriber")
	requireWithin(t, pingAlone, medianPing(other, 20), 5, "another client's ping after the stalled subscriber's overflow")

	// Now read what the slow client was sent.
	want := uint64(1)
	r := slow.untilResync(func(ev wire.Event) {
		require.Equal(t, wire.EventTeamEvent, ev.Name)
		require.Equal(t, want, ev.Seq, "no seq skipped or repeated")
		want++
	})
	require.Equal(t, want, r.FromSeq, "resync names the first seq not delivered")
	require.Less(t, r.FromSeq, uint64(n), "the overflow happened")
	// The connection is still authenticated, and the subscription can resume from fromSeq.
	require.Equal(t, true, slow.ok("ping", nil)["pong"])
	res := slow.ok("events.since", map[string]any{"sinceSeq": want - 1, "limit": 1})
	require.Len(t, res["events"], 1)
}

func TestRandomBytesNoPanic(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	s := f.seed()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 50; i++ {
		c := f.dial()
		if i%2 == 1 {
			c.hello(runR, taskP, s.p)
		}
		buf := make([]byte, 1+rng.IntN(4096))
		for j := range buf {
			buf[j] = byte(rng.IntN(256))
		}
		c.nc.Write(buf)
		c.nc.Write([]byte("\n"))
		for {
			if _, err := c.read(); err != nil {
				require.True(t, isEOF(err), "garbage closes the connection: %v", err)
				break
			}
		}
	}
	c := f.dial()
	c.hello(runR, taskQ, s.q)
	require.Equal(t, true, c.ok("ping", nil)["pong"])
	require.Zero(t, f.panics.Load())
}

// TestSubscriberOverByteBudgetGetsResync: the byte budget, not only the frame count, ends a stalled subscription:
// with room for 4,096 frames but 64 KiB, the resync comes long before 4,096 frames.
func TestSubscriberOverByteBudgetGetsResync(t *testing.T) {
	f := newFixture(t, fixtureOpts{opts: Options{OutboundQueueCap: 4096, OutboundBytes: 64 << 10, MaxFrame: 16 << 10}, write: time.Minute})
	s := f.seed()
	slow := f.dial()
	slow.hello(runR, taskP, s.p)
	f.streamUsage(t, 10000)
	slow.ok("events.subscribe", map[string]any{"sinceSeq": 0})
	// Read nothing until the server's subscription has ended: a stalled subscriber, whatever the scheduler does.
	select {
	case <-f.serverSubscription(taskP).done:
	case <-time.After(guard):
		t.Fatal("the subscription never ended")
	}
	r := slow.untilResync(func(wire.Event) {})
	require.Less(t, r.FromSeq, uint64(4096), "the byte budget ended the subscription before the frame cap")
}
