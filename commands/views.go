package commands

import (
	"sync"

	"github.com/crewlog/crewlog/projections"
)

// view is one of the engine's two copies of the state (left-right
// publication). At any time one copy is published: readers share it under
// its read lock. The other is the writer's working copy, write-locked by the
// writer for as long as it is not published, so a reader holding a stale
// pointer to it waits instead of seeing undurable events.
//
// After a group commits, the writer publishes the working copy, takes the
// write lock of the previously published copy (waiting only for the readers
// already inside it) and applies the group's events to it: the same events
// folded by the same pure Apply, so the two copies stay identical.
type view struct {
	mu sync.RWMutex
	s  *projections.State
}

// Read runs fn on the newest published state. fn must not keep s or
// anything reachable from it after it returns, and must not call the
// engine; the queries of projections return copies, which may be kept.
//
// Concurrency: any number of readers run in parallel; a reader never sees an
// event before it is durable, and never blocks the writer for longer than fn
// runs.
func (e *Engine) Read(fn func(s *projections.State)) {
	for {
		v := e.pub.Load()
		v.mu.RLock()
		if e.pub.Load() == v {
			defer v.mu.RUnlock()
			fn(v.s)
			return
		}
		v.mu.RUnlock() // swapped while we waited: try the new one
	}
}
