package eventlog

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// flushFailure fails the log stop at the first flush Pebble reports failed (a full disk: ENOSPC creating or
// writing its table), where the log went on.
//
// Pebble retries a failed flush at once and without end, each attempt on a new goroutine (tens of thousands a
// second): a core spins for as long as the store stays open. Its memtables stay in memory meanwhile, and once
// two are queued every write waits in Pebble for a flush that never comes, an append doing so with l.mu held, so
// that Close, which takes l.mu first, waited too. Failed stop, the log refuses every write before that point is
// reached (a whole memtable later), the writer that keeps state of the log (the commands engine) stops with it
// (Failed), and crewd exits after its drain, closing the store: Close ends the retries. Nothing acknowledged is
// lost: it is in the WAL, and Open flushes it again.
//
// Each failed flush also holds Pebble back for flushRetryPause before the next try, in BackgroundError, with
// Pebble's own lock held: the retries cost a few wake-ups a second instead of a core. What waits on that lock
// meanwhile is little, the log having failed stop: Pebble's metrics (StorageStats) and Close wait up to the pause;
// reads do not take it. Open of a store whose recovered state must be flushed, which Pebble's Open waits for, so
// waits for the disk without spinning, and completes once it has space.
//
// A flush that fails only after the appends were held back (a slow disk that then fills up) leaves an append
// waiting in Pebble for good, with l.mu held: the failure is recorded without l.mu (fail), so Failed closes all the
// same and crewd exits, bounding its wait for Close, which cannot end while the append waits. Nothing acknowledged
// is lost then either: the held append was not acknowledged, and what was is in the WAL.
//
// NB: Pebble tells of a failed flush to FlushEnd (info.Err) and then, with the same error, to BackgroundError,
// which it tells of other errors too (a compaction's, a read of a table's statistics), and FlushEnd also gets
// Pebble's note that a flush wrote no table, which BackgroundError never gets: the failure is the error both got.
// Both are called with Pebble's own lock held, which an append may wait for holding l.mu: fail takes no lock of
// the log's.
//
// NB: a flush that a concurrent operation cancelled fails with pebble.ErrCancelledCompaction in normal operation
// (crewbench's 64 clients on their own runs met it every few runs), and Pebble tries it again at once: it is
// neither a failure of the log nor a reason to hold Pebble back, and is logged as Pebble logs a cancelled
// compaction.
type flushFailure struct {
	logger pebble.Logger
	last   atomic.Pointer[error] // the error of the last flush FlushEnd was told of
	log    atomic.Pointer[Log]   // set once Open has built the log
}

// listen adds the flush's failure to el, whose BackgroundError must be unset, and logs every background error as
// Pebble's default does.
func (f *flushFailure) listen(el *pebble.EventListener) {
	el.FlushEnd = func(info pebble.FlushInfo) {
		if info.Err != nil && !errors.Is(info.Err, pebble.ErrCancelledCompaction) {
			f.last.Store(&info.Err)
		}
	}
	el.BackgroundError = func(err error) {
		if errors.Is(err, pebble.ErrCancelledCompaction) {
			f.logger.Infof("%s", err)
			return
		}
		f.logger.Errorf("background error: %s", err)
		last := f.last.Load()
		if last == nil || !errors.Is(err, *last) {
			return
		}
		if l := f.log.Load(); l != nil {
			// NB: fail keeps the first failure: a retry's, told again, changes nothing.
			l.fail(fmt.Errorf("flush: %w", err))
		}
		time.Sleep(flushRetryPause)
	}
}

// flushRetryPause is how long a failed flush holds Pebble back before it retries the flush.
const flushRetryPause = 100 * time.Millisecond
