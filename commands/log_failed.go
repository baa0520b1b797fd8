package commands

import (
	"fmt"

	"github.com/crewlog/crewlog/eventlog"
)

// stopWithLog fails the engine stop once its log fails stop (a write it did not make, a flush), on a goroutine of its
// own, until Close. The writer stops at it too (run), but only where it waits for work: a writer whose commit waits
// inside Pebble for a flush that failed (a full disk, once two memtables are queued) waits there for good, and the
// engine's Failed, on which crewd exits for its supervisor to restart it, would never close.
func (e *Engine) stopWithLog() {
	defer e.wg.Done()
	select {
	case <-e.log.Failed():
		e.fail(e.logFailure())
	case <-e.quit:
	}
}

// logFailure is the engine's failure when its log failed stop.
func (e *Engine) logFailure() error {
	return fmt.Errorf("%w (cause: %v)", eventlog.ErrFailed, e.log.Err())
}
