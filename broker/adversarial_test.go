package broker

import (
	"encoding/json"
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
	f := newFixture(t, fixtureOpts{opts: Options{HelloTimeout: 50 * time.Millisecond}})
	c := f.dial()
	start := time.Now()
	c.closed() // the read blocks until the server closes: a signal, not a sleep
	t.Logf("closed after %v (HelloTimeout 50ms)", time.Since(start))
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

func TestThousandIdleConnections(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	s := f.seed()
	idle := make([]*client, 1000)
	for i := range idle {
		idle[i] = f.dial()
		idle[i].hello(runR, taskP, s.p)
	}
	c := f.dial()
	c.hello(runR, taskQ, s.q)
	start := time.Now()
	require.Equal(t, true, c.ok("ping", nil)["pong"])
	t.Logf("ping with 1000 idle connections: %v", time.Since(start))
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
	c.nc.Write([]byte("{}\n")) // may already fail: the server closes the extra connection at once
	c.closed()
	// The server closes a (second hello); by the time a sees the close, its slot is free.
	a.fails("hello", map[string]any{"protocol": 1, "role": "admin", "token": testAdminToken}, wire.CodeProtocol)
	a.closed()
	d := f.dial()
	d.helloAdmin()
}

// TestSlowSubscriberGetsResync: a subscriber that stops reading while 10,000 events commit gets frames in seq
// order without a gap, then ONE resync naming the first seq it missed; the engine keeps committing and other
// clients keep being served.
func TestSlowSubscriberGetsResync(t *testing.T) {
	f := newFixture(t, fixtureOpts{opts: Options{OutboundQueueCap: 32}, write: time.Minute})
	s := f.seed()
	slow := f.dial()
	slow.hello(runR, taskP, s.p)
	slow.ok("events.subscribe", map[string]any{"sinceSeq": 0})
	other := f.dial()
	other.hello(runR, taskQ, s.q)
	ping := func() time.Duration {
		start := time.Now()
		other.ok("ping", nil)
		return time.Since(start)
	}
	before := ping()

	const n = 10000
	commit := f.streamUsage(t, n)
	after := ping()
	t.Logf("10,000 events committed in %v with a stalled subscriber; other client's ping before %v, after %v",
		commit, before, after)

	// Now read what the slow client was sent.
	want := uint64(1)
	frames := append([][]byte(nil), slow.pending...)
	for {
		var fr []byte
		if len(frames) > 0 {
			fr, frames = frames[0], frames[1:]
		} else {
			var err error
			fr, err = slow.read()
			require.NoError(t, err)
		}
		var ev wire.Event
		require.NoError(t, json.Unmarshal(fr, &ev))
		if ev.Name == wire.EventResync {
			var r wire.Resync
			require.NoError(t, json.Unmarshal(fr, &r))
			require.Equal(t, want, r.FromSeq, "resync names the first seq not delivered")
			require.Less(t, r.FromSeq, uint64(n), "the overflow happened")
			t.Logf("resync fromSeq %d after %d delivered frames", r.FromSeq, r.FromSeq-1)
			break
		}
		require.Equal(t, wire.EventTeamEvent, ev.Name)
		require.Equal(t, want, ev.Seq, "no seq skipped or repeated")
		want++
	}
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
