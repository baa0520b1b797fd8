package daemon

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrGaveUp marks an open that Interruptible stopped waiting for.
var ErrGaveUp = errors.New("gave up")

// Interruptible runs open on its own goroutine and returns its result, or gives up as soon as ctx ends (a signal,
// or the open deadline) with an error naming the cause (ErrGaveUp). Pebble's open takes no context and may retry a
// failing flush for minutes, or without end (a full disk); giving up on it lets the first SIGTERM end crewd, and
// Ctrl-C crewctl. An open that finishes after its caller gave up is closed with drop.
func Interruptible[T any](ctx context.Context, what string, open func() (T, error), drop func(T)) (T, error) {
	type result struct {
		v   T
		err error
	}
	var (
		mu     sync.Mutex
		gaveUp bool
		done   = make(chan result, 1)
	)
	go func() {
		v, err := open()
		mu.Lock()
		defer mu.Unlock()
		if gaveUp {
			if err == nil {
				drop(v)
			}
			return
		}
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
	}
	mu.Lock()
	gaveUp = true
	mu.Unlock()
	select {
	case r := <-done: // finished just as ctx ended
		if r.err == nil {
			drop(r.v)
		}
	default:
	}
	var zero T
	return zero, fmt.Errorf("daemon: %s: %w: %w", what, ErrGaveUp, context.Cause(ctx))
}
