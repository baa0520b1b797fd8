package commands

import (
	"sync"

	"github.com/crewlog/crewlog/projections"
)

// view is the published copy of the state: readers share it under its
// read lock. The writer decides against a copy of its own, which runs ahead
// by the groups in flight (pipeline.go); the publisher folds each group
// into the published copy under its write lock once the group is durable —
// the same events folded by the same pure Apply, so the published copy is
// always exactly the durable prefix of the writer's.
type view struct {
	mu sync.RWMutex
	s  *projections.State
}

// Read runs fn on the published state. fn must not keep s or anything
// reachable from it after it returns, and must not call the engine; the
// queries of projections return copies, which may be kept.
//
// Concurrency: any number of readers run in parallel; a reader never sees an
// event before it is durable. A reader never holds up the writer's
// decisions; it holds up the publication of the next group (and so its
// answers) for at most as long as fn runs, and the publisher's fold of a
// group holds up the readers that come meanwhile.
func (e *Engine) Read(fn func(s *projections.State)) {
	v := e.pub
	v.mu.RLock()
	defer v.mu.RUnlock()
	fn(v.s)
}
