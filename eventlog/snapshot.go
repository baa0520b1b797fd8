package eventlog

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/v2"
)

// Snapshot is an opaque blob (projection state, encoded by its owner) that
// reflects the log up to and including Position.
type Snapshot struct {
	Position uint64
	Data     []byte
}

// SaveSnapshot stores data as the snapshot at pos, durably, and drops older
// snapshots in the same step: the slot holds the newest one. pos must not be
// beyond the durable head. Snapshots are an optimisation only; events are
// never removed. A log that failed stop is refused (ErrFailed), and a failed
// sync of the WAL before the save fails it stop.
//
// The snapshot is written as a table of its own and ingested (ingest.go):
// its megabytes never pass through the WAL, the memtable, a flush or a
// compaction, and the older snapshots leave with the version edit that
// brings the new one in. A crash at any point leaves either the new
// snapshot or the previous one, whole and sealed.
func (l *Log) SaveSnapshot(pos uint64, data []byte) error {
	if err := l.checkSnapshotSave(pos); err != nil {
		return err
	}
	return l.saveSnapshot(pos, data)
}

// SaveSnapshotFrom is SaveSnapshot for a snapshot that write writes to w
// (an io.WriterTo's WriteTo), in pieces of any size: they are cut into the
// chunks the snapshot is stored in (snapshot_chunks.go) as they come, so
// the caller neither measures the snapshot first nor holds it whole in a
// buffer of its own, and its bytes exist once, in the chunks, until they
// are written to the table. It returns how many bytes write wrote; an
// error from write saves nothing and is returned.
func (l *Log) SaveSnapshotFrom(pos uint64, write func(w io.Writer) (int64, error)) (int64, error) {
	if err := l.checkSnapshotSave(pos); err != nil {
		return 0, err
	}
	var c chunker
	n, err := write(&c)
	if err != nil {
		return n, err
	}
	if int64(c.size) != n {
		return n, fmt.Errorf("%w: snapshot writer reported %d bytes and wrote %d", ErrInvalid, n, c.size)
	}
	return n, l.saveSnapshotWith(pos, func(w tableWriter) error { return c.writeSnapshot(w, pos) })
}

// checkSnapshotSave refuses a save to a store that cannot take one, or at
// a position the log does not durably hold.
func (l *Log) checkSnapshotSave(pos uint64) error {
	if l.opts.ReadOnly {
		return ErrReadOnly
	}
	// NB: not on a log that failed stop: its WAL keeps the write error, and Pebble's synced apply of the save
	// would meet it and panic (syncWAL).
	if err := l.refusal(); err != nil {
		return err
	}
	if h := l.durable.Load().Position; pos == 0 || pos > h {
		return fmt.Errorf("%w: snapshot position %d is outside 1..%d", ErrInvalid, pos, h)
	}
	return nil
}

// saveSnapshot stores data as the snapshot at pos (SaveSnapshot).
func (l *Log) saveSnapshot(pos uint64, data []byte) error {
	return l.saveSnapshotWith(pos, func(w tableWriter) error { return writeSnapshotChunks(w, pos, data) })
}

// saveSnapshotWith stores the snapshot at pos that write sets through its
// table writer (SaveSnapshot, SaveSnapshotFrom).
func (l *Log) saveSnapshotWith(pos uint64, write func(tableWriter) error) error {
	// NB: the WAL is synced first: a snapshot may rely on derived writes
	// made without a sync of their own (summaries, summary.go: a run the
	// snapshot no longer lists is found there), and an ingested table is
	// durable through the manifest, not the WAL.
	if err := l.syncWAL(); err != nil {
		return fmt.Errorf("eventlog: save snapshot: %w", err)
	}
	// NB: the excised span ends where the next position's keys begin: a
	// snapshot newer than pos, if a caller saved one, stays, as
	// LatestSnapshot returns the newest.
	older := pebble.KeyRange{Start: snapshotKey(0), End: snapshotKey(pos + 1)}
	if err := l.ingestReplacing(older, write); err != nil {
		return fmt.Errorf("eventlog: save snapshot: %w", err)
	}
	// The summaries' versions this snapshot no longer needs go now
	// (summary_index.go); failing that only leaves them for a later write.
	if err := l.pruneAfterSnapshot(pos); err != nil {
		l.opts.Logger.Warn("superseded summaries not pruned", "err", err)
	}
	return nil
}

// syncWAL makes every write handed to Pebble so far durable. A failed sync fails the log stop, as an append's does.
// NB: through ApplyNoSyncWait and SyncWait, as an append syncs: Pebble's synced Apply (LogData's) treats a failed
// sync as a fatal error and panics, which took the daemon down from a background snapshot instead of failing stop.
func (l *Log) syncWAL() error {
	b := l.db.NewBatch()
	_ = b.LogData(nil, nil)
	return l.commitSynced(b)
}

// commitSynced applies b and waits for its sync, failing the log stop when the sync fails, as an append's does. NB:
// never Pebble's synced Apply (Batch.Commit with Sync, LogData with Sync), which treats a failed sync as fatal and
// panics. b is closed.
func (l *Log) commitSynced(b *pebble.Batch) error {
	defer b.Close() // NB: Close handles a batch the commit pipeline still references
	return l.applySynced(b)
}

// applySynced is commitSynced leaving b to its caller to close. Every write but an append's and derived data's goes
// through it. NB: a write Pebble makes without a sync is written to the WAL in the background, and an error there (a
// full disk) reaches no one: the WAL keeps it, and Pebble panics on a later record that meets it, however much space
// there is by then. Synced, the error reaches the writer, and the log fails stop before anything meets it. The sync
// after the last derived write is awaited first (handOffSynced).
func (l *Log) applySynced(b *pebble.Batch) error {
	if err := l.handOffSynced(b); err != nil {
		return err
	}
	if err := b.SyncWait(); err != nil {
		l.fail(err)
		return fmt.Errorf("%w: sync: %v", ErrFailed, err)
	}
	return nil
}

// handOffSynced hands b to Pebble for a synced write without waiting for the sync, once the sync after the last
// derived write is over, holding the lock of the writes made without a sync (lockDerived) from that wait to the
// hand-off so that no write made without a sync comes between them (derivedSync). It is refused, ErrFailed or
// ErrClosed, when the log failed stop meanwhile, as an append is: the WAL keeps the error.
func (l *Log) handOffSynced(b *pebble.Batch) error {
	if l.opts.beforeSyncedHandOff != nil {
		l.opts.beforeSyncedHandOff()
	}
	if err := l.lockDerived(); err != nil {
		return err
	}
	defer l.unlockDerived()
	if err := l.awaitDerivedLocked(); err != nil {
		return err
	}
	if err := l.refusal(); err != nil {
		return err
	}
	if err := l.db.ApplyNoSyncWait(b, pebble.Sync); err != nil {
		l.fail(err)
		return fmt.Errorf("%w: sync: %v", ErrFailed, err)
	}
	return nil
}

// newestSnapshot returns an iterator over r's snapshots placed on the
// newest one, and its position; found is false when there is none. The
// caller closes the iterator, unless err.
func newestSnapshot(r iterable) (it *pebble.Iterator, pos uint64, found bool, err error) {
	it, err = prefixIter(r, prefixSnapshot)
	if err != nil {
		return nil, 0, false, orErr(err, nil)
	}
	if !it.Last() {
		if err := it.Error(); err != nil {
			it.Close()
			return nil, 0, false, orErr(err, nil)
		}
		return it, 0, false, nil
	}
	k := it.Key()
	if len(k) != 9 && len(k) != snapshotChunkKeyLen {
		it.Close()
		return nil, 0, false, corruptf(0, k, "malformed snapshot key")
	}
	return it, binary.BigEndian.Uint64(k[1:9]), true, nil
}

// LatestSnapshot returns the newest snapshot. It returns an error wrapping
// ErrNotFound when there is none, and one wrapping ErrCorrupt when the stored
// snapshot fails its checksum: the caller must then rebuild from position 1,
// never use the bytes.
func (l *Log) LatestSnapshot() (Snapshot, error) {
	if err := l.readable(); err != nil {
		return Snapshot{}, err
	}
	it, pos, found, err := newestSnapshot(l.db)
	if err != nil {
		return Snapshot{}, err
	}
	defer it.Close()
	if !found {
		return Snapshot{}, fmt.Errorf("%w: no snapshot", ErrNotFound)
	}
	if pos > l.durable.Load().Position {
		return Snapshot{}, corruptf(0, it.Key(), "snapshot at %d is beyond the head", pos)
	}
	data, err := readSnapshot(it, pos)
	if err != nil {
		return Snapshot{}, err
	}
	return Snapshot{Position: pos, Data: data}, nil
}
