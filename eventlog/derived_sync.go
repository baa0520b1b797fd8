package eventlog

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// derivedSync is what the log keeps of the writes it makes without a sync, derived writes (views, summaries, the
// count and the pruning of summaries) and an unsynced copy's appends (appendUnsynced): the sync requested after the
// last one, which no one has awaited yet.
//
// A derived write needs no durability of its own (a crash may lose the last ones), but it must not be left to the
// WAL's background without a sync: an error there (a full disk) reaches no one, the WAL keeps it, and Pebble panics
// on a later record that meets it, however much space there is by then. So each derived write is followed by a sync
// it does not wait for; the next derived write (or unsynced append) awaits it before it hands anything to Pebble, as
// do the writes that sync (applySynced), the synced appends (stageBatch) and Close, and a failed one fails the log
// stop. NB: not awaited at once: a fold from position 1 writes summaries at every eviction pass, thousands of them in
// a long log, and a wait for each fsync would add as many to the rebuild; an unsynced copy would wait for the fsync
// its source already made.
//
// Each holds the lock (turn) from that wait to its hand-off: a write made without a sync between them would put its
// record in the WAL before theirs with none awaiting its sync, and a failed one would make Pebble panic as above. A
// wait for the lock is given up at the log's failure (lockDerived): a synced append that holds it while Pebble holds
// its commit back, after a flush that then failed, holds it for good.
//
// The sync is awaited in the background too, so that its failure fails the log stop at once (Failed), not only at
// the next write: the last write of a pass may be followed by none for a long time.
type derivedSync struct {
	// turn is the lock: holding its one token is holding it (lockDerived, unlockDerived).
	turn chan struct{}
	// pending is the sync after the last write made without one; nil when it was awaited. Guarded by turn.
	pending *pendingSync
}

// lockDerived takes the lock of the writes made without a sync (derivedSync), or answers the log's failure
// (ErrFailed) once it fails stop while it waits. NB: not a mutex, which no failure interrupts: an append that holds
// it while Pebble holds its commit back for a flush that then failed (a full disk, once two memtables are queued)
// holds it for good, and a view, a snapshot or an operator's checkpoint made meanwhile waited for good, the server
// that made it with it.
func (l *Log) lockDerived() error {
	select {
	case l.derived.turn <- struct{}{}:
		return nil
	default:
	}
	if l.opts.derivedLockWaits != nil {
		l.opts.derivedLockWaits()
	}
	select {
	case l.derived.turn <- struct{}{}:
		return nil
	case <-l.failedCh:
		return l.refusal()
	}
}

// unlockDerived gives the lock lockDerived took back.
func (l *Log) unlockDerived() { <-l.derived.turn }

// pendingSync is a sync requested without waiting for it, which any number of writers may await.
type pendingSync struct {
	done chan struct{} // closed once the sync is over and, when it failed, the log failed stop
	err  error         // the sync's error, set before done is closed
}

// wait waits for the sync; one that failed is ErrFailed.
func (p *pendingSync) wait() error {
	<-p.done
	if p.err != nil {
		return fmt.Errorf("%w: sync: %v", ErrFailed, p.err)
	}
	return nil
}

// applyDerived applies b, a batch of derived data, without waiting for its sync (derivedSync). The caller closes b.
func (l *Log) applyDerived(b *pebble.Batch) error {
	if err := l.lockDerived(); err != nil {
		return err
	}
	defer l.unlockDerived()
	if err := l.awaitDerivedLocked(); err != nil {
		return err
	}
	if err := l.refusal(); err != nil {
		return err // NB: failed meanwhile (an append): the WAL keeps the error
	}
	if err := l.db.Apply(b, pebble.NoSync); err != nil {
		l.fail(err)
		return fmt.Errorf("%w: %v", ErrFailed, err)
	}
	return l.requestSyncLocked()
}

// appendUnsynced is appendBatch without a sync (AppendFromUnsynced), followed, as a derived write is, by a sync it
// does not wait for: the next write learns a failed WAL write of the group and fails the log stop before it hands
// Pebble anything, where Pebble would panic on it. NB: the copy's caller learns the failure at its next append, not
// at this one, and meanwhile readers see the group: a crash may lose it anyway (AppendFromUnsynced).
func (l *Log) appendUnsynced(ws []Write, extra func(*pebble.Batch)) (first uint64, err error) {
	if err := l.lockDerived(); err != nil {
		return 0, err
	}
	defer l.unlockDerived()
	if err := l.awaitDerivedLocked(); err != nil {
		return 0, err
	}
	if first, err = l.appendBatch(ws, nil, extra, false); err != nil {
		return 0, err
	}
	if err := l.requestSyncLocked(); err != nil {
		return 0, err
	}
	return first, nil
}

// requestSyncLocked asks Pebble for a sync of the WAL without waiting for it, after a write made without one, and
// keeps it for the next write to await (derivedSync). Called with the lock held (lockDerived) and nothing pending.
func (l *Log) requestSyncLocked() error {
	if err := l.wal.failed(); err != nil { // NB: the write before it may have taken the error up
		l.fail(err)
		return fmt.Errorf("%w (cause: %v)", ErrFailed, err)
	}
	sync := l.db.NewBatch()
	_ = sync.LogData(nil, nil)
	if err := l.db.ApplyNoSyncWait(sync, pebble.Sync); err != nil {
		_ = sync.Close()
		l.fail(err)
		return fmt.Errorf("%w: %v", ErrFailed, err)
	}
	p := &pendingSync{done: make(chan struct{})}
	go func() {
		err := sync.SyncWait()
		_ = sync.Close()
		if l.opts.beforeDerivedSyncOutcome != nil {
			l.opts.beforeDerivedSyncOutcome()
		}
		if err != nil {
			l.fail(err)
		}
		p.err = err
		close(p.done)
	}()
	l.derived.pending = p
	return nil
}

// awaitDerived waits for the sync after the last derived write; one that failed fails the log stop.
func (l *Log) awaitDerived() error {
	l.derived.turn <- struct{}{} // NB: Close's: it waits for the lock whether or not the log failed
	defer l.unlockDerived()
	return l.awaitDerivedLocked()
}

func (l *Log) awaitDerivedLocked() error {
	p := l.derived.pending
	if p == nil {
		return nil
	}
	err := p.wait()
	l.derived.pending = nil
	return err
}
