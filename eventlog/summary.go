package eventlog

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// Stream summaries: a small opaque record per stream that the caller
// derives from the stream's events, stamped with a position of the stream
// and filed under an ordinal the caller gives the stream (crewlog keeps
// there the summary of each run that left memory, filed under the run's
// creation ordinal, so that the list of runs is paged from disk). Each is
// stored twice, to be found by stream and in ordinal order:
//
//	key   'u' | uvarint len | stream | pos:8 BE  value sealed [ord:8 BE | data]
//	key   'w' | ord:8 BE | pos:8 BE              value sealed [uvarint len | stream | data]
//
// A summary is versioned by its position and never overwritten by another
// version: a reader asks for the newest version at or before the position
// its state reflects (upTo), so a state rebuilt from an older snapshot
// never sees a summary written for a later moment of the same stream. The
// versions no state can read any more (older than the one the newest
// snapshot needs) are deleted in the batch that writes a newer one, or
// when a later snapshot is saved: a stream keeps the version its snapshot
// needs and those written since (summary_index.go, with the index's count
// of streams).
//
// Like a view, a summary is written without waiting for a sync (the next
// write awaits it, so that a write error fails the log stop: derivedSync);
// SaveSnapshot syncs the WAL before it stores a snapshot, so a snapshot
// that relies on a summary (it no longer lists the run) is never durable
// without it. Builds that predate summaries ignore the
// keys (the store format is unchanged); Verify checks their seal, that the
// two copies agree and that the position is one of the stream's.
const (
	prefixSummary      = 'u'
	prefixSummaryByOrd = 'w'
)

// Summary is one version of a stream's summary.
type Summary struct {
	Stream   string
	Ord      uint64
	Position uint64 // a position of Stream: the version
	Data     []byte
	// PassedOver is, in what Summaries reports, the bytes of the stored versions it read from the index and passed
	// over since the summary it reported before: older ones of an ordinal, and those later than its position (those
	// after the last it reported, Summaries returns). Not stored.
	PassedOver int
}

func appendSummaryPrefix(dst []byte, stream string) []byte {
	return appendPrefixedStream(dst, prefixSummary, stream)
}

func summaryKey(stream string, pos uint64) []byte {
	k := appendSummaryPrefix(make([]byte, 0, 1+binary.MaxVarintLen64+len(stream)+8), stream)
	return binary.BigEndian.AppendUint64(k, pos)
}

func summaryOrdKey(ord, pos uint64) []byte {
	k := make([]byte, 0, 17)
	k = append(k, prefixSummaryByOrd)
	k = binary.BigEndian.AppendUint64(k, ord)
	return binary.BigEndian.AppendUint64(k, pos)
}

// parseSummaryKey splits a 'u' key; ok is false for a malformed key.
func parseSummaryKey(k []byte) (stream string, pos uint64, ok bool) {
	return parsePrefixedStreamKey(k, prefixSummary)
}

// SaveSummaries stores ss in one batch, each version next to the stream's
// others, and in the same batch deletes the versions they supersede that
// no state can read any more and updates the index's count of streams
// (summary_index.go). It does not wait for a sync (see Summary). Nothing
// is written to a read-only log (ErrReadOnly), nor to one that failed stop
// (ErrFailed).
func (l *Log) SaveSummaries(ss []Summary) error {
	if len(ss) == 0 {
		return nil
	}
	if l.opts.ReadOnly {
		return ErrReadOnly
	}
	if err := l.refusal(); err != nil {
		return err
	}
	h := l.durable.Load().Position
	si := &l.summaries
	si.mu.Lock()
	defer si.mu.Unlock()
	if err := l.loadSummaryIndexLocked(); err != nil {
		return err
	}
	// NB: indexed, so that each stream's versions are read as the batch
	// leaves them (a stream named twice in ss).
	b := l.db.NewIndexedBatch()
	defer b.Close()
	streams := si.streams
	var more []string
	for _, s := range ss {
		if s.Position == 0 || s.Position > h {
			return fmt.Errorf("%w: summary position %d is outside 1..%d", ErrInvalid, s.Position, h)
		}
		if len(s.Stream) == 0 || len(s.Stream) > MaxIDLen {
			return fmt.Errorf("%w: summary of a stream name of %d bytes", ErrInvalid, len(s.Stream))
		}
		if s.Ord == ^uint64(0) {
			return fmt.Errorf("%w: summary ordinal %d", ErrInvalid, s.Ord)
		}
		// NB: the stream's versions are read once, before the write: they
		// tell whether the stream is new to the index, and with the new
		// version are what the prune needs.
		versions, ords, err := summaryVersions(b, s.Stream)
		if err != nil {
			return fmt.Errorf("eventlog: save summaries: %w", err)
		}
		if len(versions) == 0 {
			streams++
		}
		byStream := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(s.Data)), s.Ord)
		byStream = append(byStream, s.Data...)
		byOrd := binary.AppendUvarint(make([]byte, 0, binary.MaxVarintLen64+len(s.Stream)+len(s.Data)),
			uint64(len(s.Stream)))
		byOrd = append(append(byOrd, s.Stream...), s.Data...)
		if err := b.Set(summaryKey(s.Stream, s.Position), seal(byStream), nil); err != nil {
			return fmt.Errorf("eventlog: save summaries: %w", err)
		}
		if err := b.Set(summaryOrdKey(s.Ord, s.Position), seal(byOrd), nil); err != nil {
			return fmt.Errorf("eventlog: save summaries: %w", err)
		}
		versions, ords = withVersion(versions, ords, s.Position, s.Ord)
		kept, err := pruneVersions(b, s.Stream, versions, ords, si.snapPos, s.Position)
		if err != nil {
			return fmt.Errorf("eventlog: save summaries: %w", err)
		}
		if kept {
			more = append(more, s.Stream)
		}
	}
	if err := stageSummaryCount(b, streams); err != nil {
		return fmt.Errorf("eventlog: save summaries: %w", err)
	}
	if err := l.applyDerived(b); err != nil {
		return fmt.Errorf("eventlog: save summaries: %w", err)
	}
	si.streams = streams
	for _, st := range more {
		si.pending[st] = struct{}{}
	}
	return nil
}

// LatestSummary returns the newest version of stream's summary at or
// before position upTo. It returns an error wrapping ErrNotFound when there
// is none, and one wrapping ErrCorrupt when the stored value fails its
// checksum. Data is the caller's.
func (l *Log) LatestSummary(stream string, upTo uint64) (Summary, error) {
	if err := l.readable(); err != nil {
		return Summary{}, err
	}
	return l.latestSummaryIn(l.db, stream, upTo)
}

func (l *Log) latestSummaryIn(r iterable, stream string, upTo uint64) (Summary, error) {
	lower := appendSummaryPrefix(make([]byte, 0, 1+binary.MaxVarintLen64+len(stream)+8), stream)
	upper := summaryKey(stream, upTo)
	if upTo == ^uint64(0) {
		upper = append(upper, 0)
	} else {
		upper = summaryKey(stream, upTo+1)
	}
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return Summary{}, orErr(err, nil)
	}
	defer it.Close()
	if !it.Last() {
		if err := it.Error(); err != nil {
			return Summary{}, orErr(err, nil)
		}
		return Summary{}, fmt.Errorf("%w: no summary of stream %q at or before %d", ErrNotFound, stream, upTo)
	}
	k := it.Key()
	st, pos, ok := parseSummaryKey(k)
	if !ok || st != stream {
		return Summary{}, corruptf(0, k, "malformed summary key")
	}
	v, err := it.ValueAndErr()
	if err != nil {
		return Summary{}, orErr(err, nil)
	}
	p, err := unseal(k, v)
	if err != nil {
		return Summary{}, err
	}
	if len(p) < 8 {
		return Summary{}, corruptf(pos, k, "summary of %d bytes has no ordinal", len(p))
	}
	return Summary{Stream: stream, Ord: binary.BigEndian.Uint64(p), Position: pos,
		Data: append([]byte(nil), p[8:]...)}, nil
}

// Summaries calls fn with the newest version at or before position upTo
// of each stream's summary, in ordinal order from ordinal from (inclusive;
// descending from it with desc), until fn returns false. s.Data is valid
// only during the call; s.PassedOver counts the versions read and not
// reported before it. passedOver counts those read and not reported after
// the last summary it reported (every one, if it reported none): descending,
// the older versions of the last ordinal it reached; ascending, the versions
// later than upTo of the ordinals after it. 0 when fn returned false: it
// reads nothing further.
func (l *Log) Summaries(from uint64, desc bool, upTo uint64, fn func(s Summary) bool) (passedOver int, err error) {
	if err := l.readable(); err != nil {
		return 0, err
	}
	opts := &pebble.IterOptions{LowerBound: summaryOrdKey(from, 0), UpperBound: []byte{prefixSummaryByOrd + 1}}
	if desc {
		opts = &pebble.IterOptions{LowerBound: summaryOrdKey(0, 0), UpperBound: summaryOrdKey(from+1, 0)}
		if from == ^uint64(0) {
			opts.UpperBound = []byte{prefixSummaryByOrd + 1}
		}
	}
	it, err := l.db.NewIter(opts)
	if err != nil {
		return 0, orErr(err, nil)
	}
	defer it.Close()
	// The versions of one ordinal are adjacent, oldest first: ascending,
	// the one to report is the last at or before upTo before the ordinal
	// changes; descending, the first met at or before upTo.
	var held []byte // key and value of the version ascending keeps
	var heldV []byte
	// passOver counts the version at the iterator, read and not reported, in passedOver: the bytes of the versions
	// read and not reported since the last report. NB: a version stepped over is read from its table's block with
	// its value, which its length reports without copying it.
	passOver := func() {
		v := it.LazyValue()
		passedOver += v.Len()
	}
	emit := func(k, v []byte) (bool, error) {
		ord, pos := binary.BigEndian.Uint64(k[1:9]), binary.BigEndian.Uint64(k[9:17])
		p, err := unseal(k, v)
		if err != nil {
			return false, err
		}
		n, w := binary.Uvarint(p)
		if w <= 0 || uint64(len(p)-w) < n {
			return false, corruptf(pos, k, "malformed summary")
		}
		s := Summary{Stream: string(p[w : w+int(n)]), Ord: ord, Position: pos, Data: p[w+int(n):], PassedOver: passedOver}
		passedOver = 0
		return fn(s), nil
	}
	lastOrd, emitted := uint64(0), false
	next, ok := it.Next, it.First()
	if desc {
		next, ok = it.Prev, it.Last()
	}
	for ; ok; ok = next() {
		k := it.Key()
		if len(k) != 17 || k[0] != prefixSummaryByOrd {
			return passedOver, corruptf(0, k, "malformed summary key")
		}
		ord, pos := binary.BigEndian.Uint64(k[1:9]), binary.BigEndian.Uint64(k[9:17])
		if desc {
			if pos > upTo || (emitted && ord == lastOrd) {
				passOver()
				continue
			}
			v, err := it.ValueAndErr()
			if err != nil {
				return passedOver, orErr(err, nil)
			}
			lastOrd, emitted = ord, true
			if more, err := emit(k, v); err != nil || !more {
				return passedOver, err
			}
			continue
		}
		if held != nil && binary.BigEndian.Uint64(held[1:9]) != ord {
			if more, err := emit(held, heldV); err != nil || !more {
				return passedOver, err
			}
			held = nil
		}
		if pos > upTo {
			passOver()
			continue
		}
		if held != nil {
			passedOver += len(heldV) // read, and replaced by a newer version at or before upTo
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return passedOver, orErr(err, nil)
		}
		held, heldV = append(held[:0], k...), append(heldV[:0], v...)
	}
	if err := it.Error(); err != nil {
		return passedOver, orErr(err, nil)
	}
	if held != nil {
		_, err := emit(held, heldV)
		return passedOver, err
	}
	return passedOver, nil
}

// verifySummaries checks every stream summary: its keys, its seals, that
// each version is stored under both keys alike, and that its position is
// one of its stream's positions.
func verifySummaries(snap *pebble.Snapshot, streams streamVersions) (int, error) {
	distinct, last := uint64(0), ""
	n, err := eachKey(snap, prefixSummary, func(k, v []byte) error {
		if len(k) == 1 {
			return nil // the count, checked below
		}
		stream, pos, ok := parseSummaryKey(k)
		if !ok {
			return corruptf(0, k, "malformed summary key")
		}
		p, err := unseal(k, v)
		if err != nil {
			return err
		}
		if len(p) < 8 {
			return corruptf(pos, k, "summary of %d bytes has no ordinal", len(p))
		}
		if distinct == 0 || stream != last {
			distinct, last = distinct+1, stream
		}
		if _, found := slices.BinarySearch(streams.positions(stream), pos); !found {
			return corruptf(pos, k, "summary of stream %q at position %d, which is not one of the stream's", stream, pos)
		}
		ok2 := summaryOrdKey(binary.BigEndian.Uint64(p), pos)
		v2, closer, err := snap.Get(ok2)
		if isNotFound(err) {
			return corruptf(pos, k, "summary of stream %q at position %d has no ordinal entry", stream, pos)
		}
		if err != nil {
			return orErr(err, nil) // a read that failed is not damage
		}
		defer closer.Close()
		p2, err := unseal(ok2, v2)
		if err != nil {
			return err
		}
		n, w := binary.Uvarint(p2)
		if w <= 0 || uint64(len(p2)-w) < n || string(p2[w:w+int(n)]) != stream || string(p2[w+int(n):]) != string(p[8:]) {
			return corruptf(pos, ok2, "summary of stream %q at position %d differs from its ordinal entry", stream, pos)
		}
		return nil
	})
	if err != nil {
		return n, err
	}
	byOrd, err := eachKey(snap, prefixSummaryByOrd, func(k, _ []byte) error {
		if len(k) == 1 {
			return nil // the count, checked below
		}
		if len(k) != 17 {
			return corruptf(0, k, "malformed summary key")
		}
		return nil
	})
	if err != nil {
		return n, err
	}
	// eachKey counted the count keys too.
	byStream, foundS, err := readSummaryCount(snap, summaryCountKey)
	if err != nil {
		return n, err
	}
	byOrdCount, foundO, err := readSummaryCount(snap, summaryOrdCountKey)
	if err != nil {
		return n, err
	}
	if foundS {
		n--
	}
	if foundO {
		byOrd--
	}
	switch {
	case byOrd != n:
		return n, corruptf(0, []byte{prefixSummaryByOrd}, "%d summaries by ordinal for %d by stream", byOrd, n)
	case foundS != foundO || byStream != byOrdCount:
		return n, corruptf(0, summaryCountKey, "the two counts of summarised streams disagree")
	case foundS && byStream != distinct:
		// NB: a store written before the count was kept has none (the next
		// write stores it); one that has a count and fewer streams lost
		// summaries (removed by hand).
		return n, corruptf(0, summaryCountKey, "the index of summaries records %d streams and holds %d", byStream, distinct)
	}
	return n, nil
}
