package turns

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
)

// ErrTooManyWaiting is Take's refusal of a taker that would wait behind as many takers of its key as the turns
// let wait (NewWithWaiters).
var ErrTooManyWaiting = errors.New("turns: too many takers waiting for a turn of this key")

// PerKey gives each key at most limit turns at a time, and lets at most maxWaiting takers wait for one. It is safe
// for concurrent use; its zero value is not usable: make one with New or NewWithWaiters.
type PerKey struct {
	limit      int
	maxWaiting int
	mu         sync.Mutex
	keys       map[string]*entry // only keys with a turn held or a taker waiting
	watch                        // of any key's counts

	givingUp func() // a test's hook: runs when a waiting Take's context has ended, before it gives up
}

// entry is one key's turns in use.
type entry struct {
	held    int             // turns taken and not given back, ≤ limit
	waiting []chan struct{} // takers waiting, oldest first, ≤ maxWaiting: each is closed when handed a turn
}

// New returns turns of at most limit (≥ 1) per key, with no bound on the takers waiting: the caller bounds them
// (see the package doc).
func New(limit int) *PerKey { return NewWithWaiters(limit, math.MaxInt) }

// NewWithWaiters returns turns of at most limit (≥ 1) per key, of which at most maxWaiting (≥ 0) takers per key
// wait: Take refuses the next with ErrTooManyWaiting.
func NewWithWaiters(limit, maxWaiting int) *PerKey {
	if limit < 1 {
		panic("turns: limit must be at least 1")
	}
	if maxWaiting < 0 {
		panic("turns: maxWaiting must not be negative")
	}
	return &PerKey{limit: limit, maxWaiting: maxWaiting, keys: make(map[string]*entry)}
}

// Take waits for a turn of key and returns the function that gives it back. It fails with ctx's error, holding
// nothing, when ctx ends first (or has ended already, even if a turn is free); and at once with ErrTooManyWaiting,
// holding nothing, when it would wait behind maxWaiting takers of key.
func (p *PerKey) Take(ctx context.Context, key string) (done func(), err error) {
	return p.TakeWaiting(ctx, key, nil)
}

// TakeWaiting is Take, calling waits (unless nil) once the taker is to wait for a turn, before it waits: not when it
// is handed one at once or refused.
func (p *PerKey) TakeWaiting(ctx context.Context, key string, waits func()) (done func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p.mu.Lock()
	e := p.entryOf(key)
	if e.held < p.limit && len(e.waiting) == 0 {
		e.held++
		p.notify()
		p.mu.Unlock()
		return p.giver(key, e), nil
	}
	if len(e.waiting) >= p.maxWaiting {
		// NB: a key that must be waited for has a turn held, so its entry is not idle: nothing to forget.
		p.mu.Unlock()
		return nil, ErrTooManyWaiting
	}
	ready := make(chan struct{})
	e.waiting = append(e.waiting, ready)
	p.notify()
	p.mu.Unlock()
	if waits != nil {
		waits()
	}
	select {
	case <-ready:
		return p.giver(key, e), nil
	case <-ctx.Done():
	}
	if p.givingUp != nil {
		p.givingUp()
	}
	p.mu.Lock()
	select {
	case <-ready:
		// NB: handed a turn while giving up: it is this taker's to give back, or the next waiter would never get it.
		p.giveBack(key, e)
	default:
		e.waiting = slices.DeleteFunc(e.waiting, func(c chan struct{}) bool { return c == ready })
		p.forgetIdle(key, e)
		p.notify()
	}
	p.mu.Unlock()
	return nil, ctx.Err()
}

// TryTake takes a turn of key if one is free now, without waiting behind anyone; ok is false when none is.
func (p *PerKey) TryTake(key string) (done func(), ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.entryOf(key)
	if e.held == p.limit || len(e.waiting) > 0 {
		p.forgetIdle(key, e)
		return nil, false
	}
	e.held++
	p.notify()
	return p.giver(key, e), true
}

// Load is key's turns held and takers waiting for one.
func (p *PerKey) Load(key string) (held, waiting int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.keys[key]; e != nil {
		return e.held, len(e.waiting)
	}
	return 0, 0
}

// Keys is the number of keys with a turn held or a taker waiting: the entries kept.
func (p *PerKey) Keys() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.keys)
}

// Changed returns a channel closed at the next change of any key's Load. Take it before reading Load, so that a
// change between the two is not missed. Watching costs the turns one channel per change, and nothing otherwise.
func (p *PerKey) Changed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.next()
}

// AwaitLoad waits until key's Load is held and waiting, or ctx ends (its error). A caller uses it to know that a
// taker is waiting, without sleeping.
func (p *PerKey) AwaitLoad(ctx context.Context, key string, held, waiting int) error {
	return awaitLoad(ctx, fmt.Sprintf("key %q", key), p.Changed, func() (int, int) { return p.Load(key) }, held, waiting)
}

// entryOf is key's entry, made when it has none. Under p.mu.
func (p *PerKey) entryOf(key string) *entry {
	e := p.keys[key]
	if e == nil {
		e = &entry{}
		p.keys[key] = e
	}
	return e
}

// giver is the function that gives a turn of key back, once.
func (p *PerKey) giver(key string, e *entry) func() {
	return sync.OnceFunc(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.giveBack(key, e)
	})
}

// giveBack hands a held turn of key to its oldest waiter, or frees it. Under p.mu.
func (p *PerKey) giveBack(key string, e *entry) {
	if len(e.waiting) > 0 {
		close(e.waiting[0])
		e.waiting[0] = nil
		e.waiting = e.waiting[1:]
	} else {
		e.held--
		p.forgetIdle(key, e)
	}
	p.notify()
}

// forgetIdle drops key's entry when no turn of it is held or awaited. Under p.mu.
func (p *PerKey) forgetIdle(key string, e *entry) {
	if e.held == 0 && len(e.waiting) == 0 {
		delete(p.keys, key)
	}
}
