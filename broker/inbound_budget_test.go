package broker

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
)

// TestStalledLinesStayWithinTheInboundBudget: connections that each send most of a frame longer than the read-ahead
// and stall, on subscriptions (never idle), hold no more than GlobalInboundBytes together; those that find no room
// are closed without a frame once the wait has passed, and another client's small requests are answered all along.
// Until the budget, each connection held its line's bytes for as long as it stayed, (MaxConns+AdminConns) ×
// MaxFrame in all.
func TestStalledLinesStayWithinTheInboundBudget(t *testing.T) {
	const (
		budget = 1 << 20
		conns  = 12
		sent   = 200 << 10 // each line's, spilled into 256 KiB of chunks: four fit
	)
	// NB: one credential's shares as large as the daemon's budget: this is a test of the latter.
	f := newFixture(t, fixtureOpts{opts: Options{GlobalInboundBytes: budget, InboundBytesPerCredential: budget,
		InboundBytesPerRun: budget}, write: 500 * time.Millisecond})
	s := f.seed()
	var peak atomic.Int64
	stop, sampled, in := make(chan struct{}), make(chan struct{}), &f.srv.inBudget
	t.Cleanup(func() { close(stop); recv(t, sampled, "end of the budget's sampler") })
	go func() {
		defer close(sampled)
		for {
			peak.Store(max(peak.Load(), in.inUse()))
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	polite := f.dial()
	polite.hello(runR, taskQ, s.q)

	hostile := make([]*client, conns)
	var writes sync.WaitGroup
	for i := range hostile {
		c := f.dial()
		c.hello(runR, taskP, s.p)
		c.ok("events.subscribe", map[string]any{"sinceSeq": f.eng.Head()})
		hostile[i] = c
		writes.Add(1)
		go func() {
			defer writes.Done()
			c.nc.SetWriteDeadline(time.Now().Add(guard))
			c.nc.Write([]byte(`{"id":"x","method":"ping","params":"` + strings.Repeat("x", sent))) // never ended
		}()
	}
	for range 20 {
		require.Equal(t, true, polite.ok("ping", nil)["pong"], "a small request is answered meanwhile")
		time.Sleep(10 * time.Millisecond)
	}
	// NB: a condition, not a pause past the wait: a reader without room is closed once its wait ends, and gives its
	// room to those waiting, until the lines of the readers left open fit the budget, four of them at most.
	require.Eventually(t, func() bool {
		f.srv.mu.Lock()
		defer f.srv.mu.Unlock()
		return len(f.srv.conns) <= 1+budget/(256<<10) // the polite one's, and the readers that found room
	}, guard, time.Millisecond, "those without room are closed")
	closed := 0
	for _, c := range hostile {
		c.nc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, err := c.rd.ReadFrame(); isEOF(err) {
			closed++
		} else {
			require.ErrorContains(t, err, "timeout", "no frame before the close")
		}
	}
	require.GreaterOrEqual(t, closed, conns-budget/(256<<10), "those without room are closed")
	require.Less(t, closed, conns, "those with room keep their line")
	require.Equal(t, true, polite.ok("ping", nil)["pong"])
	for _, c := range hostile {
		c.nc.Close()
	}
	awaitGroup(t, &writes, "end of the hostile lines' writes")
	require.Eventually(t, func() bool { return f.srv.inBudget.inUse() == 0 }, guard, time.Millisecond,
		"every byte is given back once")
	require.LessOrEqual(t, peak.Load(), int64(budget))
	require.Greater(t, peak.Load(), int64(budget/2), "the lines did take the budget")
}

// TestALineRefusedRoomCostsItsBytes: a line that found no room in the inbound budget is charged to its credential
// as a request of the bytes read of it, as a line over the cap is.
func TestALineRefusedRoomCostsItsBytes(t *testing.T) {
	f := newFixture(t, fixtureOpts{opts: Options{GlobalInboundBytes: wire.DefaultMaxFrame, RatePerCredential: 1,
		BurstPerCredential: 1 << 20}, write: 100 * time.Millisecond})
	clock := installPacerClock(f)
	s := f.seed()
	require.Nil(t, f.srv.inBudget.reserve(wire.DefaultMaxFrame), "another's line holds all of it")
	clock.freeze()
	w := f.dial()
	w.hello(runR, taskP, s.p)
	before := clock.level(workerKey(taskP))
	go w.nc.Write([]byte(`{"id":"p","method":"ping","params":"` + strings.Repeat("x", 10<<10)))
	w.closed()
	spent := before - clock.level(workerKey(taskP))
	require.GreaterOrEqual(t, spent, float64(requestCost(4096+1)), "at least the read-ahead and a byte were read")
	require.LessOrEqual(t, spent, float64(requestCost(10<<10+64)))
	f.srv.inBudget.release(wire.DefaultMaxFrame)
	require.Zero(t, f.srv.inBudget.inUse())
}

// TestCloseEndsAReaderWaitingForInboundRoom: a reader waiting for room in the inbound budget is ended by the close of
// its connection at once, the server's Close included, and gives back what its line held, once.
func TestCloseEndsAReaderWaitingForInboundRoom(t *testing.T) {
	f := newFixture(t, fixtureOpts{opts: Options{GlobalInboundBytes: wire.DefaultMaxFrame}, write: time.Hour})
	holdMostOfTheInboundBudget(t, f)
	waiter := f.dial()
	waiter.helloAdmin() // NB: the daemon's budget alone: P's own share would hold P back first
	go waiter.nc.Write([]byte(`{"id":"p","method":"ping","params":"` + strings.Repeat("x", 100<<10)))
	require.Eventually(t, func() bool { return waitsForRoom(&f.srv.inBudget) }, guard, time.Millisecond)
	srv, start := f.srv, time.Now()
	f.close()
	require.Less(t, time.Since(start), guard, "the server's Close does not wait for the reader's wait to end")
	require.Zero(t, srv.inBudget.inUse())
}

// TestInboundShareGivesBackOnce: a connection's close, racing its reader's takes and releases, leaves the server's
// inbound budget with nothing held: what the reader held is given back by the close or by the reader, never both
// (run with -race).
func TestInboundShareGivesBackOnce(t *testing.T) {
	b := &inboundBudget{limit: 1 << 20}
	for range 200 {
		done := make(chan struct{})
		sh := &inboundShare{budgets: [maxBudgets]*inboundBudget{b}, done: done, wait: time.Millisecond}
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			for j := range 50 {
				if sh.Take(4096 << (j % 4)) {
					sh.Release(4096 << (j % 4))
				}
				if j == 25 {
					sh.Take(4096) // held when the close comes, or refused after it
				}
			}
		}()
		go func() {
			defer wg.Done()
			close(done)
			sh.close()
		}()
		awaitGroup(t, &wg, "end of the taker and the closer")
		require.Zero(t, b.inUse())
	}
}

// TestAHelloWaitsForInboundRoomNoLongerThanItsDeadline: before its hello, a connection's line waits for room in the
// inbound budget no longer than the hello's deadline, however long the write timeout: it is a place of MaxConns that
// anyone may take, held for HelloTimeout at most.
func TestAHelloWaitsForInboundRoomNoLongerThanItsDeadline(t *testing.T) {
	f := newFixture(t, fixtureOpts{opts: Options{GlobalInboundBytes: wire.DefaultMaxFrame,
		HelloTimeout: 200 * time.Millisecond}, write: time.Hour})
	require.Nil(t, f.srv.inBudget.reserve(wire.DefaultMaxFrame), "another's line holds all of it")
	defer f.srv.inBudget.release(wire.DefaultMaxFrame)
	c := f.dial()
	start := time.Now()
	go c.nc.Write([]byte(`{"id":"h","method":"hello","params":{"token":"` + strings.Repeat("x", 10<<10)))
	c.closed()
	require.Less(t, time.Since(start), 5*time.Second)
}
