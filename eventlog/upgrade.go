package eventlog

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// upgradeChunk bounds the keys a format step holds in one batch before it
// commits them, so a step over a large store does not build one huge batch,
// except keys held together: ChunkSnapshots holds a snapshot's chunks until
// it deletes the snapshot's whole key, so a batch takes a whole snapshot
// whatever its size, and MoveOutcomes an outcome's new key until it deletes
// the old one.
// A variable only so that a test can make a step span its batches cheaply.
var upgradeChunk = 1024

// Upgrade is the write access of one format step, handed to the step's
// function by Log.Upgrade. Its methods stage derived keys; the last chunk of
// them commits in the same synced batch as the new format marker.
//
// Concurrency: used by the one goroutine running the step.
type Upgrade struct {
	l        *Log
	b        *pebble.Batch
	n        int
	progress func(done, total uint64)
}

// set stages one key, committing a full chunk without awaiting its sync
// (see BackfillStreamCatalog for why that is safe).
func (u *Upgrade) set(k, v []byte) error {
	_ = u.b.Set(k, v, nil)
	return u.staged()
}

// hold stages one key like set but commits nothing: the keys held commit with the next key set or deleted, in one
// batch, however many they are.
func (u *Upgrade) hold(k, v []byte) {
	_ = u.b.Set(k, v, nil)
	u.n++
}

// del stages the deletion of one key, like set.
func (u *Upgrade) del(k []byte) error {
	_ = u.b.Delete(k, nil)
	return u.staged()
}

// staged counts one staged key and commits a full chunk.
func (u *Upgrade) staged() error {
	u.n++
	if u.n < upgradeChunk {
		return nil
	}
	// NB: not synced, but followed by a sync that the next chunk awaits, as a derived write is (derived_sync.go):
	// a chunk left to the WAL's background whose write failed made Pebble panic on a later chunk. The sync runs
	// while the step reads and stages the next chunk's keys; the step's last batch is synced.
	if err := u.l.applyDerived(u.b); err != nil {
		return fmt.Errorf("format step: %w", err)
	}
	u.b.Close()
	u.b, u.n = u.l.db.NewBatch(), 0
	return nil
}

// UpgradeOptions tune Upgrade; nil means defaults.
type UpgradeOptions struct {
	// Progress, when set, is called now and then with a position reached
	// and the durable head.
	Progress func(done, total uint64)
}

// Upgrade takes the store from format from to format to = from+1: step
// stages the step's writes, then ws (the step's record, e.g. an event naming
// the migration) and the new format marker are appended in one synced
// batch together with the step's last writes. A crash before that batch
// leaves the store at format from, with at most some of the step's derived
// keys written: steps must be idempotent, and running the step again
// finishes it.
//
// The store must be at format from (open it with AllowOlderFormat); an
// error wrapping ErrInvalid says otherwise. Upgrade must not run
// concurrently with Append.
func (l *Log) Upgrade(from, to uint32, step func(*Upgrade) error, opts *UpgradeOptions, ws ...Write) error {
	if l.opts.ReadOnly {
		return ErrReadOnly
	}
	if to != from+1 || to > CurrentFormat {
		return fmt.Errorf("%w: format step %d → %d (this build writes format %d)", ErrInvalid, from, to, CurrentFormat)
	}
	cur, err := l.Format()
	if err != nil {
		return err
	}
	if cur != from {
		return fmt.Errorf("%w: format step %d → %d on a store at format %d", ErrInvalid, from, to, cur)
	}
	// NB: a step may write outcome keys (MoveOutcomes) that a lookup found unrecorded before it: on return, when
	// every write of the step is visible, so that Append does not take such a key for new.
	defer l.forgetAbsent()
	u := &Upgrade{l: l, b: l.db.NewBatch()}
	if opts != nil {
		u.progress = opts.Progress
	}
	defer func() {
		if u.b != nil {
			u.b.Close()
		}
	}()
	if step != nil {
		if err := step(u); err != nil {
			return err
		}
	}
	marker := func(b *pebble.Batch) { _ = b.Set(keyFormat, encodeFormat(to), nil) }
	if len(ws) == 0 {
		marker(u.b)
		if err := l.applySynced(u.b); err != nil {
			return fmt.Errorf("eventlog: format marker: %w", err)
		}
		return nil
	}
	// NB: the sync after the step's last chunk first, and cleared, as the next chunk would (appendBatch awaits it too).
	if err := l.awaitDerived(); err != nil {
		return fmt.Errorf("format step: %w", err)
	}
	b := u.b
	// NB: appendBatch owns the batch from here: it closes it after the
	// sync, and a refused one is dropped unclosed like Append's.
	u.b = nil
	_, err = l.appendBatch(ws, b, marker, true)
	return err
}
