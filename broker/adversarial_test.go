package broker

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/events"
)

// TestOversizeLineClosesWithoutFrame: a line over the frame cap, or more blank lines than a frame may take, closes
// the connection without a frame (blank lines are read all the same: a stream of them is not skipped for ever).
func TestOversizeLineClosesWithoutFrame(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	s := f.seed()
	for _, fill := range []string{"x", "\n"} {
		for _, authed := range []bool{false, true} {
			c := f.dial()
			if authed {
				c.hello(runR, taskP, s.p)
			}
			go c.nc.Write([]byte(strings.Repeat(fill, 300*1024) + "\n")) // may fail once the server closes
			c.closed()
		}
	}
	f.dial().helloAdmin()
}

func TestNoHelloClosedAfterTimeout(t *testing.T) {
	const timeout = 50 * time.Millisecond
	f := newFixture(t, fixtureOpts{opts: Options{HelloTimeout: timeout}})
	start := time.Now() // before the dial: the server's deadline starts at accept
	c := f.dial()
	c.closed() // the read blocks until the server closes: a signal, not a sleep
	// That it closes at all shows the deadline works (nothing else ends a silent connection); how soon after the
	// deadline is not asserted: on a loaded machine the close can come any time later.
	require.GreaterOrEqual(t, time.Since(start), timeout, "closed before the hello deadline")
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

// TestThousandIdleConnections: 1,000 idle connections (subscribed, with a wait in flight) are all served and hold
// up nothing: another client's pings and commits of another run are answered, those commits wake none of the
// 1,000 waiters, and a message to P fans out to P's connections. What they cost in time is
// BenchmarkIdleConnections' report, not an assertion: a before/after ratio fails when the machine's load changes
// between the two measurements.
func TestThousandIdleConnections(t *testing.T) {
	f, s, c, o2 := idleScene(t)
	idle := openIdle(f, s, 1000)
	woken := f.srv.waits.woken.Load()
	for i := 0; i < 20; i++ {
		require.Equal(t, true, c.ok("ping", nil)["pong"])
		o2.ok("task.usage", map[string]any{"taskId": "T2", "input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0})
	}
	require.Equal(t, woken, f.srv.waits.woken.Load(), "commits of another run woke none of the 1,000 waiters")
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

// idleScene seeds run R and run R2 (task T2) and connects a worker of Q and R2's orchestrator: the clients whose
// service idle connections must not hold up.
func idleScene(tb testing.TB) (f *fixture, s seeded, q, o2 *client) {
	f = newFixture(tb, fixtureOpts{opts: wideOpen()})
	s = f.seed()
	orch2 := f.seedRun("R2", "T2")
	q = f.dial()
	q.hello(runR, taskQ, s.q)
	o2 = f.dial()
	o2.hello("R2", events.OrchestratorKey, orch2)
	return f, s, q, o2
}

// openIdle opens n connections of task P, each subscribed from the head and with a task.waitStatus in flight.
func openIdle(f *fixture, s seeded, n int) []*client {
	idle := make([]*client, n)
	for i := range idle {
		idle[i] = f.dial()
		idle[i].hello(runR, taskP, s.p)
		idle[i].ok("events.subscribe", map[string]any{"sinceSeq": f.eng.Head()})
		idle[i].sendLine(`{"id":"w","method":"task.waitStatus","params":{"taskId":"Q","until":"completed","timeoutMs":60000}}`)
	}
	return idle
}

// TestMaxConns: a connection over MaxConns+AdminConns (every place, the admin's included, here the admin's
// connections) gets one frame saying why, not a reset; a closed connection gives its place back.
func TestMaxConns(t *testing.T) {
	f := newFixture(t, fixtureOpts{opts: Options{MaxConns: 2}})
	held := make([]*client, 2+AdminConns)
	for i := range held {
		held[i] = f.dial()
		held[i].helloAdmin()
	}
	a := held[0]
	c := f.dial()
	end := c.untilError() // the one frame of a connection over every place: a reason, not a reset
	require.Equal(t, wire.CodeTooManyConnections, end.Error.Code)
	c.closed()
	// The server closes a (second hello); by the time a sees the close, its slot is free.
	a.fails("hello", map[string]any{"protocol": 1, "role": "admin", "token": testAdminToken}, wire.CodeProtocol)
	a.closed()
	d := f.dial()
	d.helloAdmin()
}

// TestClientThatStopsReadingIsCutOff: a client that sends requests and never reads their answers fills its socket;
// the broker's write of the next answer then waits at most writeTimeout before the connection is closed, so the
// connection's reader is not held for ever (answers are written at once when the socket takes them, and under the
// deadline only when it does not).
func TestClientThatStopsReadingIsCutOff(t *testing.T) {
	f := newFixture(t, fixtureOpts{opts: Options{RatePerCredential: -1}, write: 200 * time.Millisecond})
	s := f.seed()
	c := f.dial()
	c.hello(runR, taskP, s.p)
	pings := []byte(strings.Repeat(`{"id":"p","method":"ping","params":null}`+"\n", 64))
	for i := 0; i < 100_000; i++ { // until the broker stops reading: it waits on the answers this client leaves
		c.nc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		if _, err := c.nc.Write(pings); err != nil {
			break
		}
	}
	require.Eventually(t, func() bool {
		f.srv.mu.Lock()
		defer f.srv.mu.Unlock()
		return len(f.srv.conns) == 0
	}, 10*time.Second, 10*time.Millisecond, "the connection is closed once an answer waited writeTimeout")
}

// TestSlowSubscriberGetsResync: a subscriber that stops reading while 10,000 events commit gets frames in seq
// order without a gap, then ONE resync naming the first seq it missed; the commits all complete while it reads
// nothing (the writer never waits for a client), and another client is still answered. How fast, compared with a
// subscriber that reads, is BenchmarkStalledSubscriber's report: a before/after ratio is not asserted, since it
// fails when the machine's load changes between the two measurements.
func TestSlowSubscriberGetsResync(t *testing.T) {
	f := newFixture(t, fixtureOpts{opts: Options{OutboundQueueCap: 32}, write: time.Minute})
	s := f.seed()
	slow := f.dial()
	slow.hello(runR, taskP, s.p)
	other := f.dial()
	other.hello(runR, taskQ, s.q)
	const n = 10000
	slow.ok("events.subscribe", map[string]any{"sinceSeq": 0}) // then it reads nothing until the stream is in
	f.streamUsage(t, n)
	require.Equal(t, true, other.ok("ping", nil)["pong"], "another client is answered after the overflow")

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

// TestPipelinedRequestsKeepTheirOwnParams: requests sent in one write, the last of them split across two, are each
// served with the params it carried, recorded as sent, and a broker method's params are its own: the reader reads a
// request's params in place, and the bytes they were read into are overwritten as it reads the requests after them.
func TestPipelinedRequestsKeepTheirOwnParams(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	s := f.seed()
	o, p := f.dial(), f.dial()
	o.hello(runR, events.OrchestratorKey, s.orch)
	p.hello(runR, taskP, s.p)

	send := func(id, body string) string {
		return fmt.Sprintf(`{"id":%q,"method":"msg.send","params":{"to":"parent","body":%q,"commandId":"cmd-%s"}}`+"\n",
			id, body, id)
	}
	bodies := []string{"first", "second", strings.Repeat("third", 100)}
	all := send("a", bodies[0]) + `{"id":"i","method":"msg.inbox","params":{"limit":1}}` + "\n" + send("b", bodies[1]) +
		send("c", bodies[2])
	cut := len(all) - 40
	write := func(b string) {
		p.nc.SetWriteDeadline(time.Now().Add(guard))
		_, err := p.nc.Write([]byte(b))
		require.NoError(t, err)
	}
	answers := func(ids ...string) {
		for _, id := range ids {
			frame, err := p.read()
			require.NoError(t, err)
			var r wire.Response
			require.NoError(t, json.Unmarshal(frame, &r))
			require.Equal(t, id, r.ID)
			require.Nil(t, r.Error, "%s: %s", id, frame)
		}
	}
	write(all[:cut])
	answers("a", "i", "b")
	write(all[cut:])
	answers("c")

	var want []string
	for _, b := range bodies {
		want = append(want, `"`+b+`"`) // msg.send records its body as JSON text (jsonBody)
	}
	require.Equal(t, want, inboxBodies(o))
	for i, id := range []string{"a", "b", "c"} {
		require.Nil(t, p.call("msg.send", map[string]any{"to": "parent", "body": bodies[i], "commandId": "cmd-" + id}).Error,
			"%s's retry is the request its outcome recorded", id)
	}
	require.Len(t, inboxBodies(o), 3)
}
