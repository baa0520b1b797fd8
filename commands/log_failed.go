package commands

import (
	"fmt"
	"time"

	"github.com/crewlog/crewlog/eventlog"
)

// stopWithLog fails the engine stop once its log has failed stop (a write it did not make, a flush) and its writer
// has not stopped with it within stuckWriterGrace, on a goroutine of its own, until Close. The writer stops at the
// log's failure itself (run), where it waits for work or learns it from its own commit; but a writer whose commit
// waits inside Pebble for a flush that failed (a full disk, once two memtables are queued) waits there for good, and
// the engine's Failed, on which crewd exits for its supervisor to restart it, would never close.
//
// NB: after a grace, not at once: the writer that learns the failure from its commit answers that group's callers
// and those behind it in order (pipeline.go), which a failure from this goroutine would overtake. A writer still
// held then answers nothing more: the callers waiting for it, or for room in its queue, are answered with the
// failure at once (stuck), their outcome unknown as after a failed sync, and so is a catch-up (CatchUp) waiting for
// it. Close still waits for the writer: crewd bounds its wait (closeStore).
func (e *Engine) stopWithLog() {
	defer e.wg.Done()
	select {
	case <-e.log.Failed():
	case <-e.quit:
		return
	}
	grace := time.NewTimer(stuckWriterGrace)
	defer grace.Stop()
	graceOver := grace.C
	if h := e.opts.hooks; h != nil && h.stuckWriterGraceEnd != nil {
		if over := h.stuckWriterGraceEnd(stuckWriterGrace); over != nil {
			graceOver = over
		}
	}
	select {
	case <-graceOver:
		e.fail(e.logFailure())
		close(e.stuck) // NB: after fail, so that a caller let go by it reads the failure (wait, enqueue)
	case <-e.stopped:
	case <-e.quit:
	}
}

// stuckWriterGrace is how long the engine leaves its writer to stop with a log that failed stop before it stops
// without it (stopWithLog).
const stuckWriterGrace = 2 * time.Second

// logFailure is the engine's failure when its log failed stop.
func (e *Engine) logFailure() error {
	return fmt.Errorf("%w (cause: %v)", eventlog.ErrFailed, e.log.Err())
}
