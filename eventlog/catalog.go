package eventlog

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// The stream catalog (format 2) has one entry per stream, written in the
// batch that gives the stream its version 1:
//
//	key   'r' | stream
//	value sealed msgpack array [first uint (position of version 1), time int (its unix ns)]
//
// Why: every question of the form "which runs does this store hold, and
// since when" (an offline runs listing, a retention sweep, a per-run export
// starting at the run's first position) otherwise scans the whole log or
// the whole stream index. The entry never changes after it is written, so
// it costs one key per run, not per append.
const prefixCatalog = 'r'

const catalogFields = 2

// StreamInfo is a stream catalog entry.
type StreamInfo struct {
	Stream string
	First  uint64 // position of the stream's version 1
	Time   int64  // that event's time, unix nanoseconds
}

func catalogKey(stream string) []byte {
	k := make([]byte, 0, 1+len(stream))
	k = append(k, prefixCatalog)
	return append(k, stream...)
}

func encodeCatalog(first uint64, time int64) []byte {
	b := appendArrayHeader(make([]byte, 0, 24), catalogFields)
	b = appendUint(b, first)
	b = appendInt(b, time)
	return seal(b)
}

func decodeCatalog(key, value []byte) (StreamInfo, error) {
	p, err := unseal(key, value)
	if err != nil {
		return StreamInfo{}, err
	}
	r := reader{b: p}
	if n := r.arrayLen(); r.err == nil && n != catalogFields {
		return StreamInfo{}, corruptf(0, key, "catalog entry has %d fields, want %d", n, catalogFields)
	}
	si := StreamInfo{Stream: string(key[1:])}
	si.First = r.uint()
	si.Time = r.int()
	if r.err == nil && r.off != len(r.b) {
		r.err = errors.New("trailing bytes")
	}
	if r.err != nil {
		return StreamInfo{}, corruptf(0, key, "catalog entry: %v", r.err)
	}
	if si.First == 0 {
		return StreamInfo{}, corruptf(0, key, "catalog entry names position 0")
	}
	return si, nil
}

// Streams returns the stream catalog in stream-name order. It needs format
// 2 or later: on an older store (open read-only, or before its migration)
// it returns an error wrapping ErrFormatTooOld rather than a partial list.
// Only streams whose first event is durable are listed.
func (l *Log) Streams() ([]StreamInfo, error) {
	if err := l.readable(); err != nil {
		return nil, err
	}
	f, err := l.getFormat()
	if err != nil {
		return nil, err
	}
	if f < FormatStreamCatalog {
		return nil, &FormatError{Store: f, Supported: CurrentFormat}
	}
	limit := l.durable.Load().Position
	it, err := prefixIter(l.db, prefixCatalog)
	if err != nil {
		return nil, orErr(err, nil)
	}
	defer it.Close()
	var out []StreamInfo
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, orErr(err, nil)
		}
		si, err := decodeCatalog(it.Key(), v)
		if err != nil {
			return nil, err
		}
		if si.First <= limit {
			out = append(out, si)
		}
	}
	return out, orErr(it.Error(), nil)
}

// BackfillStreamCatalog writes the catalog entry of every stream that lacks
// one, reading the log once. It is the body of the step to format 2 and is
// idempotent: an entry is a pure function of the log, so a rerun after a
// crash writes the same bytes or nothing. Full chunks are committed as it
// goes (without awaiting their sync: the caller's final synced batch, which
// carries the new format marker, makes them durable, because the WAL is
// synced in order);
// the entries of the last chunk are staged into u and committed with it.
func (u *Upgrade) BackfillStreamCatalog() (added int, err error) {
	l := u.l
	seen := make(map[string]struct{})
	it := l.Read(1)
	defer it.Close()
	for it.Next() {
		e := it.Event()
		if e.StreamVersion != 1 {
			continue
		}
		if _, dup := seen[e.Stream]; dup {
			return added, corruptf(e.Position, eventKey(e.Position), "stream %q has a second version 1", e.Stream)
		}
		seen[e.Stream] = struct{}{}
		key := catalogKey(e.Stream)
		want := encodeCatalog(e.Position, e.Time)
		have, closer, err := l.db.Get(key)
		switch {
		case err == nil:
			same := string(have) == string(want)
			closer.Close()
			if same {
				continue
			}
		case !isNotFound(err):
			return added, fmt.Errorf("eventlog: read catalog: %w", err)
		}
		if err := u.set(key, want); err != nil {
			return added, err
		}
		added++
		if u.progress != nil && added%1024 == 0 {
			u.progress(e.Position, it.limit)
		}
	}
	if err := it.Close(); err != nil {
		return added, err
	}
	return added, nil
}

// verifyCatalog checks, on a format-2 store, that every stream has exactly
// the catalog entry its version 1 implies, and that no entry names a stream
// the log does not have.
func verifyCatalog(snap *pebble.Snapshot, streams streamVersions) error {
	it, err := prefixIter(snap, prefixCatalog)
	if err != nil {
		return orErr(err, nil)
	}
	defer it.Close()
	seen := make(map[string]bool, len(streams))
	var ev Event
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		v, err := it.ValueAndErr()
		if err != nil {
			return orErr(err, nil)
		}
		si, err := decodeCatalog(k, v)
		if err != nil {
			return err
		}
		vers := streams.positions(si.Stream)
		if len(vers) == 0 {
			return corruptf(0, k, "catalog names a stream the log does not have")
		}
		if si.First != vers[0] {
			return corruptf(vers[0], k, "catalog says the stream starts at %d, it starts at %d", si.First, vers[0])
		}
		rec, closer, err := snap.Get(eventKey(si.First))
		if err != nil {
			return orErr(err, nil)
		}
		err = DecodeRecord(rec, &ev)
		closer.Close()
		if err != nil {
			return &CorruptError{Position: si.First, Key: keyString(eventKey(si.First)), Reason: err.Error()}
		}
		if ev.Time != si.Time {
			return corruptf(si.First, k, "catalog time %d, the record's is %d", si.Time, ev.Time)
		}
		seen[si.Stream] = true
	}
	if err := it.Error(); err != nil {
		return orErr(err, nil)
	}
	if len(seen) != len(streams) {
		// NB: the stream without an entry that begins first in the log, not the first a walk over the map meets:
		// Verify names the first bad position, the same one at every run. Positions start at 1.
		var first string
		var at uint64
		for s, v := range streams {
			if !seen[s] && (at == 0 || v.pos[0] < at) {
				first, at = s, v.pos[0]
			}
		}
		return corruptf(at, catalogKey(first), "stream has no catalog entry")
	}
	return nil
}
