package turns

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// await waits, without sleeping, until key's turns are held and waiting as wanted.
func await(t *testing.T, p *PerKey, key string, held, waiting int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a guard against a hang, not a timing
	defer cancel()
	require.NoError(t, p.AwaitLoad(ctx, key, held, waiting))
}

// endedContext is a context that has ended.
func endedContext(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	return ctx
}

// taker is turns to take: a PerKey or the Shared turn.
type taker interface {
	Take(ctx context.Context, key string) (done func(), err error)
}

// takeAsync starts a Take of key and returns where its outcome arrives.
func takeAsync(ctx context.Context, p taker, key string) <-chan taken {
	out := make(chan taken, 1)
	go func() {
		done, err := p.Take(ctx, key)
		out <- taken{done, err}
	}()
	return out
}

// gaveUp is the outcome of a Take of key, one turn of which is held, whose context ends while it waits.
func gaveUp(t *testing.T, p *PerKey, key string) taken {
	ctx, cancel := context.WithCancel(t.Context())
	w := takeAsync(ctx, p, key)
	await(t, p, key, 1, 1)
	cancel()
	return <-w
}

type taken struct {
	done func()
	err  error
}

// TestBoundedPerKey: a key has at most limit turns; TryTake is refused beyond them, Take waits; other keys are not
// held up; giving a turn back frees it and the idle key is forgotten.
func TestBoundedPerKey(t *testing.T) {
	for _, limit := range []int{1, 2, 4} {
		t.Run(fmt.Sprint("limit ", limit), func(t *testing.T) {
			p := New(limit)
			var dones []func()
			for i := range limit {
				done, err := p.Take(t.Context(), "a")
				require.NoError(t, err, "turn %d of %d", i+1, limit)
				dones = append(dones, done)
			}
			_, ok := p.TryTake("a")
			require.False(t, ok, "a turn beyond the limit")
			held, waiting := p.Load("a")
			require.Equal(t, [2]int{limit, 0}, [2]int{held, waiting}, "a refused TryTake holds nothing")
			doneB, ok := p.TryTake("b")
			require.True(t, ok, "another key has its own turns")
			doneB()

			w := takeAsync(t.Context(), p, "a")
			await(t, p, "a", limit, 1)
			dones[0]()
			got := <-w
			require.NoError(t, got.err, "the freed turn goes to the waiter")
			dones[0] = got.done
			await(t, p, "a", limit, 0)

			for _, done := range dones {
				done()
			}
			require.Zero(t, p.Keys(), "no turn in use: no entry")
		})
	}
}

// TestTakeServesInOrder: waiters are served oldest first, each when a turn is given back; TryTake does not jump the
// queue.
func TestTakeServesInOrder(t *testing.T) {
	p := New(1)
	first, err := p.Take(t.Context(), "k")
	require.NoError(t, err)
	var waiters []<-chan taken
	for i := range 3 {
		waiters = append(waiters, takeAsync(t.Context(), p, "k"))
		await(t, p, "k", 1, i+1)
	}
	_, ok := p.TryTake("k")
	require.False(t, ok)
	done := first
	for i, w := range waiters {
		done()
		got := <-w
		require.NoError(t, got.err)
		for _, later := range waiters[i+1:] {
			require.Empty(t, later, "waiter %d served before waiter %d", i+1, i)
		}
		done = got.done
	}
	done()
	require.Zero(t, p.Keys())
}

// TestTakeHonoursTheContext: a waiter whose context ends gives up holding nothing and leaves no entry behind; a
// context already ended gets no turn even when one is free.
func TestTakeHonoursTheContext(t *testing.T) {
	p := New(1)
	ended := endedContext(t)
	_, err := p.Take(ended, "free")
	require.ErrorIs(t, err, context.Canceled)
	require.Zero(t, p.Keys())

	hold, err := p.Take(t.Context(), "k")
	require.NoError(t, err)
	got := gaveUp(t, p, "k")
	require.ErrorIs(t, got.err, context.Canceled)
	require.Nil(t, got.done)
	held, waiting := p.Load("k")
	require.Equal(t, [2]int{1, 0}, [2]int{held, waiting})
	hold()
	require.Zero(t, p.Keys())
}

// TestHandedATurnWhileGivingUp: a waiter handed a turn just as its context ended gives that turn back, to the next
// waiter, rather than losing it.
func TestHandedATurnWhileGivingUp(t *testing.T) {
	p := New(1)
	hold, err := p.Take(t.Context(), "k")
	require.NoError(t, err)
	p.givingUp = hold // the turn is handed to the waiter between its context's end and its giving up
	got := gaveUp(t, p, "k")
	require.ErrorIs(t, got.err, context.Canceled)
	require.Zero(t, p.Keys(), "the handed turn was given back")
	done, ok := p.TryTake("k")
	require.True(t, ok, "the key's turn is free")
	done()
}

// TestWaitersAreBounded: with NewWithWaiters a key has at most maxWaiting takers waiting; the next Take fails at
// once with ErrTooManyWaiting, holding nothing and holding up no other key, and the cap frees as a waiter is served
// or gives up.
func TestWaitersAreBounded(t *testing.T) {
	for _, tc := range []struct{ limit, maxWaiting int }{{1, 0}, {1, 1}, {2, 3}} {
		t.Run(fmt.Sprintf("limit %d, %d waiting", tc.limit, tc.maxWaiting), func(t *testing.T) {
			p := NewWithWaiters(tc.limit, tc.maxWaiting)
			var dones []func()
			for range tc.limit {
				done, err := p.Take(t.Context(), "k")
				require.NoError(t, err)
				dones = append(dones, done)
			}
			var waiters []<-chan taken
			for i := range tc.maxWaiting {
				waiters = append(waiters, takeAsync(t.Context(), p, "k"))
				await(t, p, "k", tc.limit, i+1)
			}
			refused := func(why string) {
				t.Helper()
				done, err := p.Take(t.Context(), "k")
				require.ErrorIs(t, err, ErrTooManyWaiting, why)
				require.Nil(t, done)
				held, waiting := p.Load("k")
				require.Equal(t, [2]int{tc.limit, tc.maxWaiting}, [2]int{held, waiting}, "a refused Take holds nothing")
			}
			refused("a taker beyond the waiters")
			done, err := p.Take(t.Context(), "other")
			require.NoError(t, err, "another key has its own waiters")
			done()
			require.Equal(t, 1, p.Keys())

			if tc.maxWaiting > 0 {
				// A waiter served frees its place ...
				dones[0]()
				got := <-waiters[0]
				require.NoError(t, got.err)
				dones[0], waiters = got.done, waiters[1:]
				await(t, p, "k", tc.limit, tc.maxWaiting-1)
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				leaving := takeAsync(ctx, p, "k")
				await(t, p, "k", tc.limit, tc.maxWaiting)
				refused("the served waiter's place is taken again")

				// ... and so does a waiter giving up.
				cancel()
				require.ErrorIs(t, (<-leaving).err, context.Canceled)
				await(t, p, "k", tc.limit, tc.maxWaiting-1)
				waiters = append(waiters, takeAsync(t.Context(), p, "k"))
				await(t, p, "k", tc.limit, tc.maxWaiting)
				refused("the given-up waiter's place is taken again")
			}

			for _, w := range waiters {
				dones[0]()
				got := <-w
				require.NoError(t, got.err)
				dones[0] = got.done
			}
			for _, done := range dones {
				done()
			}
			require.Zero(t, p.Keys())
		})
	}
}

// TestHandedATurnWhileGivingUpFreesItsPlace: a waiter handed a turn just as its context ended no longer counts as
// waiting: another taker may wait in its place before it gives the handed turn back, and gets that turn.
func TestHandedATurnWhileGivingUpFreesItsPlace(t *testing.T) {
	p := NewWithWaiters(1, 1)
	hold, err := p.Take(t.Context(), "k")
	require.NoError(t, err)
	handed, resume := make(chan struct{}), make(chan struct{})
	p.givingUp = func() {
		hold() // the turn is handed to the waiter between its context's end and its giving up
		close(handed)
		<-resume
	}
	ctx, cancel := context.WithCancel(t.Context())
	givingUp := takeAsync(ctx, p, "k")
	await(t, p, "k", 1, 1)
	_, err = p.Take(t.Context(), "k")
	require.ErrorIs(t, err, ErrTooManyWaiting, "the one place to wait is taken")
	cancel()
	<-handed
	await(t, p, "k", 1, 0)
	next := takeAsync(t.Context(), p, "k")
	await(t, p, "k", 1, 1)
	_, err = p.Take(t.Context(), "k")
	require.ErrorIs(t, err, ErrTooManyWaiting)
	close(resume)
	require.ErrorIs(t, (<-givingUp).err, context.Canceled)
	got := <-next
	require.NoError(t, got.err, "the handed turn was given back, to the waiter in its place")
	await(t, p, "k", 1, 0)
	got.done()
	require.Zero(t, p.Keys())
}

// TestGivingBackIsOnce: a turn's function gives back that turn only, however often it is called.
func TestGivingBackIsOnce(t *testing.T) {
	p := New(2)
	a, err := p.Take(t.Context(), "k")
	require.NoError(t, err)
	b, ok := p.TryTake("k")
	require.True(t, ok)
	a()
	a()
	held, _ := p.Load("k")
	require.Equal(t, 1, held, "b's turn is still held")
	c, ok := p.TryTake("k")
	require.True(t, ok)
	_, ok = p.TryTake("k")
	require.False(t, ok, "b's and c's turns are the key's two")
	b()
	c()
	c()
	b()
	require.Zero(t, p.Keys())
}

// TestKeysDoNotAccumulate: a key is kept only while a turn of it is held or awaited, however many keys ever took
// one, by any path (given back, refused, given up).
func TestKeysDoNotAccumulate(t *testing.T) {
	p := New(1)
	ended := endedContext(t)
	for i := range 10000 {
		key := fmt.Sprint("credential-", i)
		done, err := p.Take(t.Context(), key)
		require.NoError(t, err)
		_, ok := p.TryTake(key)
		require.False(t, ok)
		_, err = p.Take(ended, key)
		require.ErrorIs(t, err, context.Canceled)
		done()
	}
	require.Zero(t, p.Keys())
}

// TestConcurrentTurnsStayBounded: many goroutines taking, trying and giving up the turns of a few keys never have
// more than the limit of one key inside at once, nor more than maxWaiting of one key waiting, and leave no entry
// behind.
func TestConcurrentTurnsStayBounded(t *testing.T) {
	const limit, keys, workers, rounds = 2, 3, 16, 300
	for _, tc := range []struct {
		name       string
		maxWaiting int
		p          *PerKey
	}{
		{"unbounded waiters", workers, New(limit)},
		{"bounded waiters", 1, NewWithWaiters(limit, 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			var inside, worst [keys]atomic.Int32
			stop := make(chan struct{})
			sampled := make(chan int, 1)
			go func() { // the most waiters of a key, sampled after each change
				most := 0
				for {
					changed := p.Changed()
					for k := range keys {
						_, w := p.Load(fmt.Sprint(k))
						most = max(most, w)
					}
					select {
					case <-changed:
					case <-stop:
						sampled <- most
						return
					}
				}
			}()
			var wg sync.WaitGroup
			for g := range workers {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(g), 1))
					for range rounds {
						k := rng.IntN(keys)
						var done func()
						switch rng.IntN(3) {
						case 0:
							done, _ = p.TryTake(fmt.Sprint(k))
						case 1:
							done, _ = p.Take(context.Background(), fmt.Sprint(k))
						default:
							ctx, cancel := context.WithCancel(context.Background())
							go cancel() // gives up at any point of the wait, or not at all
							done, _ = p.Take(ctx, fmt.Sprint(k))
						}
						if done == nil {
							continue
						}
						n := inside[k].Add(1)
						for w := worst[k].Load(); n > w && !worst[k].CompareAndSwap(w, n); w = worst[k].Load() {
						}
						inside[k].Add(-1)
						done()
						if rng.IntN(2) == 0 {
							done()
						}
					}
				})
			}
			wg.Wait()
			close(stop)
			require.LessOrEqual(t, <-sampled, tc.maxWaiting, "takers waiting for one key")
			for k := range keys {
				require.LessOrEqual(t, worst[k].Load(), int32(limit), "key %d", k)
				require.Positive(t, worst[k].Load(), "key %d was never taken", k)
			}
			require.Zero(t, p.Keys())
		})
	}
}

func TestNewRefusesNoTurns(t *testing.T) {
	require.PanicsWithValue(t, "turns: limit must be at least 1", func() { New(0) })
	require.PanicsWithValue(t, "turns: limit must be at least 1", func() { NewWithWaiters(0, 1) })
	require.PanicsWithValue(t, "turns: maxWaiting must not be negative", func() { NewWithWaiters(1, -1) })
}

// TestTakeWaitingCallsWaitsOnlyWhenItWaits: a taker handed a turn at once, or refused because too many wait, does
// not call waits; one that waits calls it once, before it waits (the dashboard starts watching its client then).
func TestTakeWaitingCallsWaitsOnlyWhenItWaits(t *testing.T) {
	p := NewWithWaiters(1, 1)
	var waits atomic.Int32
	called := make(chan struct{}, 1)
	count := func() {
		waits.Add(1)
		called <- struct{}{}
	}
	done, err := p.TakeWaiting(t.Context(), "k", count)
	require.NoError(t, err)
	require.Zero(t, waits.Load(), "handed a turn at once")

	out := make(chan taken, 1)
	go func() {
		d, err := p.TakeWaiting(t.Context(), "k", count)
		out <- taken{d, err}
	}()
	select {
	case <-called:
	case <-time.After(time.Minute): // a guard against a hang, not a timing
		t.Fatal("the taker that waits never called waits")
	}
	await(t, p, "k", 1, 1)
	require.EqualValues(t, 1, waits.Load(), "called once, as it waits")
	_, err = p.TakeWaiting(t.Context(), "k", count)
	require.ErrorIs(t, err, ErrTooManyWaiting)
	require.EqualValues(t, 1, waits.Load(), "refused at once")

	done()
	w := <-out
	require.NoError(t, w.err)
	w.done()
	require.EqualValues(t, 1, waits.Load())
}
