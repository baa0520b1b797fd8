package commands

import (
	"context"
	"fmt"
	"time"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// CatchUp folds into the engine's state every event its log holds beyond
// the state, and publishes them as a commit would (Read, Changed,
// RunChanged and subscriptions see them). Those are events another engine
// committed and a copier appended to this engine's log: a follower in a
// cluster calls CatchUp after each group it copies, and a follower about to
// become the writer calls it once it holds the whole replicated log, before
// it decides anything.
//
// CatchUp runs on the writer goroutine, between groups. An error reading or
// decoding the log makes the engine fail stop (the state may hold part of
// the events); it is returned wrapping ErrFailed, as is the failure of an
// engine that stopped without its writer, held inside its failed log.
func (e *Engine) CatchUp(ctx context.Context) error {
	c := make(chan error, 1)
	select {
	case e.sync <- c:
	case <-e.done:
		if err := e.failure(); err != nil {
			return err
		}
		return ErrClosed
	case <-e.stuck:
		// NB: the writer is held inside the log for good (stopWithLog) and takes no catch-up: the engine failed.
		return e.failure()
	case <-ctx.Done():
		return ctx.Err()
	}
	return <-c
}

// catchUp is CatchUp on the writer goroutine. It settles the pipeline
// first (the events it folds follow the groups in flight) and returns once
// the publisher has published them.
func (e *Engine) catchUp() error {
	if head, _ := e.log.Head(); head < e.next {
		return nil
	}
	fs := e.settle()
	f := fs[0]
	it := e.log.Read(e.next)
	dec := events.NewDecoder()
	var newest int64 // the latest time of the events caught up, which the engine's time does not go back from
	for it.Next() {
		r := it.Event()
		if r.Position != e.next {
			it.Close()
			return fmt.Errorf("commands: catch up: the log gave position %d, the engine expected %d",
				r.Position, e.next)
		}
		ev, err := projections.FromLogWith(dec, r)
		if err == nil {
			err = e.faultIn(ev.Stream, &f.faulted)
		}
		if err != nil {
			it.Close()
			return fmt.Errorf("commands: catch up at position %d: %w", r.Position, err)
		}
		projections.Apply(e.work, ev)
		newest = max(newest, ev.Time)
		f.applied = append(f.applied, ev)
		e.next++
	}
	if newest != 0 {
		e.times.observe(time.Unix(0, newest))
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("commands: catch up: %w", err)
	}
	if now := e.times.now(); e.evictDue(now) {
		f.evicted, f.madeCold = e.evictPass(now)
	}
	// A group of no requests: publishing it answers nobody but notifies
	// readers.
	f.group, f.next = []*pending{}, e.next
	e.flights <- f
	fs[0] = e.acquire() // the publisher gave f back: it is published
	e.release(fs...)
	return e.failure()
}
