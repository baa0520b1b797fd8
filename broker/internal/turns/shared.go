package turns

import (
	"context"
	"slices"
	"sync"
)

// Shared is one turn that every key takes in turn: a key's takers wait in arrival order, and the keys with a taker
// waiting are handed the turn round-robin, so however many takers one key queues, a taker of another key waits for
// at most one turn of each key ahead of it, not for all of that key's takers. It is safe for concurrent use; make
// one with NewShared.
type Shared struct {
	mu     sync.Mutex
	held   bool
	queues map[string][]chan struct{} // each key's takers waiting, oldest first; only keys with one
	order  []string                   // the keys with a taker waiting, the next to be served first
	watch                             // of Load

	givingUp func() // a test's hook: runs when a waiting Take's context has ended, before it gives up
}

// NewShared returns a free shared turn.
func NewShared() *Shared { return &Shared{queues: make(map[string][]chan struct{})} }

// Take waits for the turn on behalf of key and returns the function that gives it back, once. It fails with ctx's
// error, holding nothing, when ctx ends first (or has ended already, even if the turn is free).
func (s *Shared) Take(ctx context.Context, key string) (done func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if !s.held && len(s.order) == 0 {
		s.held = true
		s.notify()
		s.mu.Unlock()
		return s.giver(), nil
	}
	ready := make(chan struct{})
	if len(s.queues[key]) == 0 {
		s.order = append(s.order, key)
	}
	s.queues[key] = append(s.queues[key], ready)
	s.notify()
	s.mu.Unlock()
	select {
	case <-ready:
		return s.giver(), nil
	case <-ctx.Done():
	}
	if s.givingUp != nil {
		s.givingUp()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-ready:
		// NB: handed the turn while giving up: it is this taker's to hand on, or nobody would ever have it again.
		s.handOn()
	default:
		q := slices.DeleteFunc(s.queues[key], func(c chan struct{}) bool { return c == ready })
		s.setQueue(key, q)
		s.notify()
	}
	return nil, ctx.Err()
}

// Load is whether the turn is held (1) or not (0), and the takers of every key waiting for it.
func (s *Shared) Load() (held, waiting int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held {
		held = 1
	}
	for _, q := range s.queues {
		waiting += len(q)
	}
	return held, waiting
}

// Changed returns a channel closed at the next change of Load. Take it before reading Load, so that a change
// between the two is not missed.
func (s *Shared) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next()
}

// AwaitLoad waits until Load is held and waiting, or ctx ends (its error): a caller learns that a taker is waiting
// without sleeping.
func (s *Shared) AwaitLoad(ctx context.Context, held, waiting int) error {
	return awaitLoad(ctx, "the shared turn", s.Changed, s.Load, held, waiting)
}

// Keys is the number of keys with a taker waiting: the entries kept.
func (s *Shared) Keys() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queues)
}

// giver is the function that gives the turn back, once.
func (s *Shared) giver() func() {
	return sync.OnceFunc(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.handOn()
	})
}

// handOn hands the held turn to the oldest taker of the next key in order, that key then going to the back of the
// order if it has more takers waiting; or frees the turn. Under s.mu.
func (s *Shared) handOn() {
	defer s.notify()
	if len(s.order) == 0 {
		s.held = false
		return
	}
	key := s.order[0]
	s.order = s.order[1:]
	q := s.queues[key]
	close(q[0])
	q[0] = nil
	if s.setQueue(key, q[1:]); len(q) > 1 {
		s.order = append(s.order, key)
	}
}

// setQueue sets key's waiting takers to q, forgetting the key (in the map and the order) when q is empty. Under s.mu.
func (s *Shared) setQueue(key string, q []chan struct{}) {
	if len(q) > 0 {
		s.queues[key] = q
		return
	}
	delete(s.queues, key)
	s.order = slices.DeleteFunc(s.order, func(k string) bool { return k == key })
}
