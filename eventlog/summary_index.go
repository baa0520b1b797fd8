package eventlog

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// The index of summaries keeps two things besides the summaries
// themselves, so that it can be trusted at start-up without reading it
// whole and does not grow with the times a stream was summarised:
//
// Its count. The number of streams with at least one version is stored,
// sealed as a uint64 BE, under each of the two prefixes alone
//
//	key   'u'    value sealed [streams:8 BE]
//	key   'w'    value sealed [streams:8 BE]
//
// and rewritten in every batch that writes summaries. Each key sorts before
// every summary of its prefix, so removing either key range removes its
// count too: a caller that knows how many streams the index must hold (the
// projections know it from their snapshot) tells in O(1) that the index was
// removed, and rebuilds it. A store written before the count was kept has
// none: the first reader counts the streams once (O(index)) and the next
// write stores it. Verify checks that both counts agree with the keys.
//
// Pruning. A version is read by a state at a position at or after it and
// before the stream's next version. The states that can still read the
// index are the ones at or after the newest snapshot S (a restart starts
// there; an older snapshot is never kept, and a fold from position 1 reads
// only versions it wrote itself, see SaveSummaries). So of a stream's
// versions, those older than the newest one at or before S can no longer be
// read, and they are deleted in the same batch that writes a version (the
// write is atomic: a crash leaves the old versions or the new set, never a
// stream without the version S needs). A stream whose superseded version S
// still needs keeps it until a later snapshot passes the new one: the
// snapshot's save prunes those streams then (a crash before loses only
// that pruning; the stream's next write does it). So a stream holds at
// most the version S needs and those written after S.
var (
	summaryCountKey      = []byte{prefixSummary}
	summaryOrdCountKey   = []byte{prefixSummaryByOrd}
	summaryFirstByStream = []byte{prefixSummary, 0x01} // below every 'u' summary key: a stream is ≥ 1 byte
)

// summaryIndex is what the log keeps in memory about its index of
// summaries; guarded by its own mutex, which also serialises the writes of
// summaries (each reads the versions it prunes).
type summaryIndex struct {
	mu      sync.Mutex
	loaded  bool
	streams uint64 // streams with at least one version
	snapPos uint64 // position of the newest snapshot (0: none)
	// pending are the streams whose superseded versions the newest
	// snapshot still needed when they were written: the next snapshot
	// prunes them.
	pending map[string]struct{}
}

// loadLocked reads the count and the newest snapshot's position once.
func (l *Log) loadSummaryIndexLocked() error {
	si := &l.summaries
	if si.loaded {
		return nil
	}
	n, found, err := readSummaryCount(l.db, summaryCountKey)
	if err != nil {
		return err
	}
	if !found {
		if n, err = countSummaryStreams(l.db, ^uint64(0)); err != nil {
			return err
		}
		if err := l.storeSummaryCountLocked(n); err != nil {
			return err
		}
	}
	pos, err := newestSnapshotPosition(l.db)
	if err != nil {
		return err
	}
	si.streams, si.snapPos, si.loaded = n, pos, true
	if si.pending == nil {
		si.pending = make(map[string]struct{})
	}
	return nil
}

// storeSummaryCountLocked keeps n, the streams just counted on a store
// written before the count was kept, so that the walk of the whole index is
// made once, not at every open: at 10,000 finished runs it read every
// summary into the block cache, which start-up then held (10 MiB more RSS
// than at 1,000). Held with summaries.mu, as every write of the index is,
// so n is the index's count when it is stored. A log that writes nothing
// more (failed stop) counts it again at its next open.
func (l *Log) storeSummaryCountLocked(n uint64) error {
	if l.opts.ReadOnly || l.refusal() != nil {
		return nil // counted at every open of a read-only copy, as before
	}
	b := l.db.NewBatch()
	defer b.Close()
	if err := stageSummaryCount(b, n); err != nil {
		return fmt.Errorf("eventlog: keep the count of summarised streams: %w", err)
	}
	if err := l.applyDerived(b); err != nil {
		return fmt.Errorf("eventlog: keep the count of summarised streams: %w", err)
	}
	return nil
}

// readSummaryCount reads the count stored under key.
func readSummaryCount(r getter, key []byte) (n uint64, found bool, err error) {
	v, closer, err := r.Get(key)
	if isNotFound(err) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, orErr(err, nil)
	}
	defer closer.Close()
	p, err := unseal(key, v)
	if err != nil {
		return 0, false, err
	}
	if len(p) != 8 {
		return 0, false, corruptf(0, key, "count of summarised streams of %d bytes", len(p))
	}
	return binary.BigEndian.Uint64(p), true, nil
}

// countSummaryStreams counts the streams with a version at or before upTo
// (O(index)).
func countSummaryStreams(r iterable, upTo uint64) (uint64, error) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: summaryFirstByStream, UpperBound: []byte{prefixSummary + 1}})
	if err != nil {
		return 0, orErr(err, nil)
	}
	defer it.Close()
	var n uint64
	last := ""
	for ok := it.First(); ok; ok = it.Next() {
		stream, pos, ok := parseSummaryKey(it.Key())
		if !ok {
			return 0, corruptf(0, it.Key(), "malformed summary key")
		}
		if pos <= upTo && (n == 0 || stream != last) {
			n++
			last = stream
		}
	}
	return n, orErr(it.Error(), nil)
}

// newestSnapshotPosition is the position of the newest snapshot's key (0
// when there is none), its value unread.
func newestSnapshotPosition(r iterable) (uint64, error) {
	it, pos, _, err := newestSnapshot(r)
	if err != nil {
		return 0, err
	}
	defer it.Close()
	return pos, nil
}

// summaryVersions returns the positions of stream's versions, ascending,
// and the ordinal each is filed under, as r holds them.
func summaryVersions(r iterable, stream string) (pos []uint64, ords []uint64, err error) {
	lower := appendSummaryPrefix(nil, stream)
	upper := summaryKey(stream, ^uint64(0))
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: append(upper, 0)})
	if err != nil {
		return nil, nil, orErr(err, nil)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		st, p, ok := parseSummaryKey(it.Key())
		if !ok || st != stream {
			return nil, nil, corruptf(0, it.Key(), "malformed summary key")
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, nil, orErr(err, nil)
		}
		ord := ^uint64(0) // unknown: a corrupt value's ordinal entry is left to Verify
		if b, err := unseal(it.Key(), v); err == nil && len(b) >= 8 {
			ord = binary.BigEndian.Uint64(b)
		}
		pos, ords = append(pos, p), append(ords, ord)
	}
	return pos, ords, orErr(it.Error(), nil)
}

// supersededVersions returns the indexes in versions (ascending) that no
// state at or after snapshot position snap can read: those older than the
// newest version at or before snap. keep is never among them (the version
// being written: a fold from position 1 reads what it wrote, even when a
// newer snapshot's version exists).
func supersededVersions(versions []uint64, snap, keep uint64) []int {
	i, _ := slices.BinarySearch(versions, snap+1) // versions[i-1] is the newest ≤ snap
	if i == 0 {
		return nil
	}
	var out []int
	for j := range versions[:i-1] {
		if versions[j] != keep {
			out = append(out, j)
		}
	}
	return out
}

// pruneStream stages in b the deletion of stream's superseded versions (as
// b sees them) and reports whether the stream still holds more than one
// version after it.
func pruneStream(b *pebble.Batch, stream string, snap, keep uint64) (more bool, err error) {
	versions, ords, err := summaryVersions(b, stream)
	if err != nil {
		return false, err
	}
	return pruneVersions(b, stream, versions, ords, snap, keep)
}

// withVersion is versions (ascending) and their ordinals once the version
// at pos filed under ord is written: added in its place, or its ordinal
// replaced when pos is one of them already.
func withVersion(versions, ords []uint64, pos, ord uint64) ([]uint64, []uint64) {
	i, found := slices.BinarySearch(versions, pos)
	if found {
		ords[i] = ord
		return versions, ords
	}
	return slices.Insert(versions, i, pos), slices.Insert(ords, i, ord)
}

// pruneVersions stages in b the deletion of the superseded ones of
// stream's versions (ascending, with their ordinals, as b holds them) and
// reports whether the stream still holds more than one version after it.
func pruneVersions(b *pebble.Batch, stream string, versions, ords []uint64, snap, keep uint64) (
	more bool, err error) {
	drop := supersededVersions(versions, snap, keep)
	for _, j := range drop {
		if err := b.Delete(summaryKey(stream, versions[j]), nil); err != nil {
			return false, err
		}
		if ords[j] != ^uint64(0) {
			if err := b.Delete(summaryOrdKey(ords[j], versions[j]), nil); err != nil {
				return false, err
			}
		}
	}
	return len(versions)-len(drop) > 1, nil
}

// stageSummaryCount stages n as both counts.
func stageSummaryCount(b *pebble.Batch, n uint64) error {
	v := binary.BigEndian.AppendUint64(nil, n)
	if err := b.Set(summaryCountKey, seal(v), nil); err != nil {
		return err
	}
	return b.Set(summaryOrdCountKey, seal(v), nil)
}

// SummaryStreams returns the number of streams the index of summaries holds
// a version of, as recorded with the index (counted once, O(index), on a
// store written before the count was kept). A caller that knows how many
// it must hold compares: a removed index counts 0.
func (l *Log) SummaryStreams() (uint64, error) {
	if err := l.readable(); err != nil {
		return 0, err
	}
	l.summaries.mu.Lock()
	defer l.summaries.mu.Unlock()
	if err := l.loadSummaryIndexLocked(); err != nil {
		return 0, err
	}
	return l.summaries.streams, nil
}

// SummaryStreamsAt counts the streams with a version at or before upTo by
// reading the whole index (O(index): for checks, not for start-up).
func (l *Log) SummaryStreamsAt(upTo uint64) (uint64, error) {
	if err := l.readable(); err != nil {
		return 0, err
	}
	return countSummaryStreams(l.db, upTo)
}

// DropSummaries deletes the whole index of summaries, its counts included,
// and, with snapshot, the snapshot too, durably and in one batch. The index
// is derived data: a caller that found it wanting drops it with the
// snapshot that relies on it and folds the log from position 1, which
// writes it again (a crash before leaves a store that still fails the
// caller's check; after, one with neither).
func (l *Log) DropSummaries(snapshot bool) error {
	if l.opts.ReadOnly {
		return ErrReadOnly
	}
	if err := l.refusal(); err != nil {
		return err
	}
	l.summaries.mu.Lock()
	defer l.summaries.mu.Unlock()
	b := l.db.NewBatch()
	ranges := [][2]byte{{prefixSummary, prefixSummary + 1}, {prefixSummaryByOrd, prefixSummaryByOrd + 1}}
	if snapshot {
		ranges = append(ranges, [2]byte{prefixSnapshot, prefixSnapshot + 1})
	}
	for _, r := range ranges {
		if err := b.DeleteRange([]byte{r[0]}, []byte{r[1]}, nil); err != nil {
			_ = b.Close()
			return fmt.Errorf("eventlog: drop summaries: %w", err)
		}
	}
	if err := l.commitSynced(b); err != nil {
		return fmt.Errorf("eventlog: drop summaries: %w", err)
	}
	l.summaries.loaded = false
	clear(l.summaries.pending)
	return nil
}

// pruneAfterSnapshot deletes the versions that the snapshot just saved at
// pos no longer needs, of the streams written since with a superseded
// version kept. Derived data: an error leaves them for a later write.
func (l *Log) pruneAfterSnapshot(pos uint64) error {
	si := &l.summaries
	si.mu.Lock()
	defer si.mu.Unlock()
	if !si.loaded {
		return nil // nothing written since Open: nothing pending
	}
	si.snapPos = max(si.snapPos, pos)
	if len(si.pending) == 0 {
		return nil
	}
	b := l.db.NewIndexedBatch()
	defer b.Close()
	still := make(map[string]struct{})
	for stream := range si.pending {
		more, err := pruneStream(b, stream, si.snapPos, 0)
		if err != nil {
			return fmt.Errorf("eventlog: prune summaries: %w", err)
		}
		if more {
			still[stream] = struct{}{}
		}
	}
	if err := l.applyDerived(b); err != nil {
		return fmt.Errorf("eventlog: prune summaries: %w", err)
	}
	si.pending = still
	return nil
}

// refusal is why l writes nothing more (nil when it may): closed, or failed stop after a write error (nothing more is
// written then, derived data included: the store is reopened first). It reads atomics only: an append calls it with
// l.mu held, so that Close, which sets closed under l.mu, waits for every append it let through; every other write
// (a view, a summary, a snapshot, a checkpoint) without it, which an append holds while Pebble holds it back, so that
// once a flush failed then, the append held for good, such a write is refused rather than waiting for good.
func (l *Log) refusal() error {
	if l.closed.Load() {
		return ErrClosed
	}
	if err := l.fatalRefusal(); err != nil {
		return err
	}
	if err := l.Err(); err != nil {
		return fmt.Errorf("%w (cause: %v)", ErrFailed, err)
	}
	if err := l.wal.failed(); err != nil {
		l.fail(err) // NB: walFailure.record may not have failed the log yet: refused only once failed stop
		return fmt.Errorf("%w (cause: %v)", ErrFailed, err)
	}
	return nil
}
