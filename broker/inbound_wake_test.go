package broker

import (
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
)

// TestAReleaseWakesOnlyTheWaitersItsRoomServes: a release of the inbound budget wakes the readers waiting for room
// whose bytes it frees, in the order they came, those that fit, and no others: until then every release woke every
// waiter, which all tried the budget again, one release a herd of wake-ups and of tries in vain.
func TestAReleaseWakesOnlyTheWaitersItsRoomServes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		waits   []int64 // each waiter's bytes, in the order they came
		release int64
		woken   []int // the waiters woken
	}{
		{"room for one of eight", []int64{1, 1, 1, 1, 1, 1, 1, 1}, 1, []int{0}},
		{"room for three of eight", []int64{1, 1, 1, 1, 1, 1, 1, 1}, 3, []int{0, 1, 2}},
		{"room for none", []int64{2, 2, 2}, 1, nil},
		{"the first fits", []int64{3, 1, 1}, 3, []int{0}},
		{"the first does not fit, and holds none back", []int64{3, 1, 1}, 2, []int{1, 2}},
		{"those that fit, the first first", []int64{3, 2, 1, 1}, 4, []int{0, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &inboundBudget{limit: 4}
			require.Nil(t, b.reserve(4), "a line holds all of it")
			rooms := make([]<-chan struct{}, len(tc.waits))
			for i, n := range tc.waits {
				rooms[i] = b.reserve(n)
				require.NotNil(t, rooms[i], "waiter %d finds no room", i)
			}
			b.release(tc.release)
			var woken []int
			for i, room := range rooms {
				select {
				case <-room:
					woken = append(woken, i)
				default:
				}
			}
			require.Equal(t, tc.woken, woken)
			require.Equal(t, int64(4), b.inUse()+tc.release-sumOf(tc.waits, tc.woken),
				"the bytes of those woken are counted for them")
		})
	}
}

// sumOf is the sum of ns[i] for each i of at.
func sumOf(ns []int64, at []int) int64 {
	var sum int64
	for _, i := range at {
		sum += ns[i]
	}
	return sum
}

// waiters is how many readers wait for room in b.
func waiters(b *inboundBudget) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.waiters)
}

// TestOneReleaseServesOneOfManyWaitingReaders: of readers waiting for room in the daemon's budget, each for a chunk
// of its own credential's share too, a release of room for one serves one, and the others wait on, none woken; as
// room comes, every one of them is served, and the budgets count what they took, no more.
func TestOneReleaseServesOneOfManyWaitingReaders(t *testing.T) {
	const readers = 16
	global := &inboundBudget{limit: readers}
	require.Nil(t, global.reserve(readers), "a line holds all of it")
	var took atomic.Int32
	var wg sync.WaitGroup
	shares := make([]*inboundBudget, readers)
	for i := range shares {
		shares[i] = &inboundBudget{limit: 1}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if takeAll([]*inboundBudget{global, shares[i]}, 1, nil, time.Hour, nil) == taken {
				took.Add(1)
			}
		}()
	}
	require.Eventually(t, func() bool { return waiters(global) == readers }, guard, time.Millisecond)
	global.release(1)
	require.Eventually(t, func() bool { return took.Load() == 1 }, guard, time.Millisecond)
	require.Equal(t, readers-1, waiters(global), "the others wait on, unwoken")
	require.Equal(t, int64(readers), global.inUse())
	for i := int32(2); i <= readers; i++ {
		global.release(1)
		require.Eventually(t, func() bool { return took.Load() == i }, guard, time.Millisecond)
	}
	awaitGroup(t, &wg, "end of the readers' takes")
	require.Zero(t, waiters(global))
	require.Equal(t, int64(readers), global.inUse(), "each took one byte of it, the line the rest")
	for i, share := range shares {
		require.Equal(t, int64(1), share.inUse(), "reader %d's share", i)
	}
}

// TestNoReaderWaitingForRoomIsLost: readers of chunks of all sizes, waiting for room in budgets others take and
// give back meanwhile, each take their chunk or give up at the end of their wait, and once all have given back what
// they took, no budget counts a byte and none has a reader waiting: none is left waiting for a release that came,
// and none given room it did not take (run with -race).
func TestNoReaderWaitingForRoomIsLost(t *testing.T) {
	global, run := &inboundBudget{limit: 64}, &inboundBudget{limit: 32}
	creds := []*inboundBudget{{limit: 16}, {limit: 16}, {limit: 16}}
	var wg sync.WaitGroup
	var took, refused atomic.Int32
	for i := range 200 {
		bs := []*inboundBudget{global, run, creds[i%len(creds)]}
		if i%5 == 0 {
			bs = bs[:1] // the admin's
		}
		n, wait := int64(1+i%16), time.Duration(i%7)*time.Millisecond
		wg.Add(1)
		go func() {
			defer wg.Done()
			if takeAll(bs, n, nil, wait, nil) != taken {
				refused.Add(1)
				return
			}
			took.Add(1)
			time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
			releaseAll(bs, n)
		}()
	}
	awaitGroup(t, &wg, "end of the takers")
	require.Equal(t, int32(200), took.Load()+refused.Load())
	require.Positive(t, took.Load())
	for _, b := range append([]*inboundBudget{global, run}, creds...) {
		require.Zero(t, b.inUse())
		require.Zero(t, waiters(b))
		require.Nil(t, b.reserve(b.limit), "all of it is free")
	}
}

// holdMostOfTheInboundBudget has a worker of f send a line of 200 KiB it never ends, which holds more than half of
// a daemon's inbound budget of a frame, and returns it once it does.
func holdMostOfTheInboundBudget(t *testing.T, f *fixture) *client {
	t.Helper()
	s := f.seed()
	holder := f.dial()
	holder.hello(runR, taskP, s.p)
	go holder.nc.Write([]byte(`{"id":"p","method":"ping","params":"` + strings.Repeat("x", 200<<10)))
	require.Eventually(t, func() bool { return f.srv.inBudget.inUse() > wire.DefaultMaxFrame/2 }, guard,
		time.Millisecond)
	return holder
}

// TestAClientGoneEndsItsReadersWaitForInboundRoom: a client that closes its connection while its reader waits for
// room in the inbound budget has its connection ended at once, its place among the connections free and the waiter
// gone, long before the wait would end; until then the reader learned of the close only when its wait ended, the
// write timeout later, so a client could keep a connection and a waiter for that long with each line it began and
// left, or, before its hello, for the hello's deadline. A reader whose room comes reads on.
func TestAClientGoneEndsItsReadersWaitForInboundRoom(t *testing.T) {
	f := newFixture(t, fixtureOpts{opts: Options{GlobalInboundBytes: wire.DefaultMaxFrame, HelloTimeout: time.Minute},
		write: time.Minute})
	holder := holdMostOfTheInboundBudget(t, f)
	conns := func() int {
		f.srv.mu.Lock()
		defer f.srv.mu.Unlock()
		return len(f.srv.conns)
	}

	for i := range 4 {
		gone := f.dial()
		if i%2 == 0 {
			gone.helloAdmin() // NB: the daemon's budget alone: P's own share would hold P back first
		}
		gone.nc.SetWriteDeadline(time.Now().Add(guard))
		_, err := gone.nc.Write([]byte(`{"id":"g","method":"ping","params":"` + strings.Repeat("x", 100<<10)))
		require.NoError(t, err)
		require.Eventually(t, func() bool { return waitsForRoom(&f.srv.inBudget) }, guard, time.Millisecond)
		require.Equal(t, 2, conns())
		gone.nc.Close()
		require.Eventually(t, func() bool { return conns() == 1 && !waitsForRoom(&f.srv.inBudget) },
			2*time.Second, time.Millisecond, "the connection ends as its client goes, not when the wait would")
	}

	waiter := f.dial()
	waiter.helloAdmin()
	waiter.nc.SetWriteDeadline(time.Now().Add(guard))
	go waiter.nc.Write([]byte(`{"id":"w","method":"ping","params":"` + strings.Repeat("y", 100<<10) + "\"}\n"))
	require.Eventually(t, func() bool { return waitsForRoom(&f.srv.inBudget) }, guard, time.Millisecond)
	holder.nc.Close()
	frame, err := waiter.read()
	require.NoError(t, err)
	r := waiter.result("ping", decodeResponse(t, frame))
	require.Equal(t, true, r["pong"], "a reader whose room came reads its line on")
	require.Equal(t, true, waiter.ok("ping", nil)["pong"])
	require.Eventually(t, func() bool { return f.srv.inBudget.inUse() == 0 }, guard, time.Millisecond)
}

// TestAReaderWhoseRoomCameKeepsItsHelloDeadline: a reader that waited for inbound room before its hello, and whose
// room came, reads its connection on to the hello's deadline, no further: the watch for its client's close, ended by
// a deadline in the past, gives the reader its own back.
func TestAReaderWhoseRoomCameKeepsItsHelloDeadline(t *testing.T) {
	f := newFixture(t, fixtureOpts{opts: Options{GlobalInboundBytes: wire.DefaultMaxFrame,
		HelloTimeout: 500 * time.Millisecond}, write: time.Hour})
	require.Nil(t, f.srv.inBudget.reserve(wire.DefaultMaxFrame), "another's line holds all of it")
	c := f.dial()
	c.nc.SetWriteDeadline(time.Now().Add(guard))
	_, err := c.nc.Write([]byte(`{"id":"h","method":"hello","params":{"token":"` + strings.Repeat("x", 10<<10)))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return waitsForRoom(&f.srv.inBudget) }, guard, time.Millisecond)
	f.srv.inBudget.release(wire.DefaultMaxFrame)
	require.Eventually(t, func() bool { return !waitsForRoom(&f.srv.inBudget) }, guard, time.Millisecond)
	start := time.Now()
	c.closed() // the hello never ends
	require.Less(t, time.Since(start), 5*time.Second, "closed at the hello's deadline")
	require.Eventually(t, func() bool { return f.srv.inBudget.inUse() == 0 }, guard, time.Millisecond)
}
