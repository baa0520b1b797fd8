package eventlog

import (
	"github.com/cockroachdb/pebble/v2"
)

// Iterator walks durable events in position order. Use:
//
//	it := log.Read(1)
//	for it.Next() {
//		ev := it.Event()
//	}
//	if err := it.Close(); err != nil { ... }
//
// The iterator checks each record's checksum and that positions are
// contiguous; the hash chain is checked by Verify, ReadChained and ReadChainedTransient.
//
// The iterator is bounded by the durable head at the time it was created: it
// never shows an event that is not yet durable, and it does not follow new
// appends (open a new one from the last position + 1 for that).
//
// Concurrency: an Iterator is used by one goroutine. Errors: Err (and Close)
// report the first error; corruption (a table block that fails its checksum
// included) wraps ErrCorrupt and names the position when it is in a record;
// a read that fails (an I/O error) does not wrap it.
type Iterator struct {
	it     *pebble.Iterator // over event records
	idx    *pebble.Iterator // over a stream's index entries; nil for Read
	stream string
	want   uint64 // next expected position (Read) or version (ReadStream)
	limit  uint64 // durable head at creation
	ev     Event
	err    error
	entry  []uint64 // positions of the current index entry (ReadStream)
	entryV uint64   // version of entry[0]
	entryI int      // next index into entry
	done   bool
	primed bool
	// transient: Event aliases the storage engine's memory (ReadTransient,
	// ReadStreamTransient).
	transient bool
	// chain: each record's hash is checked against prev, the hash of the
	// record before it (ReadChained, ReadChainedTransient).
	chain bool
	prev  [32]byte
}

// Read returns an iterator over the durable events from position from
// (1 for the whole log).
func (l *Log) Read(from uint64) *Iterator {
	if from == 0 {
		from = 1
	}
	t := &Iterator{want: from, limit: l.durable.Load().Position}
	if t.err = l.readable(); t.err != nil || from > t.limit {
		t.done = true
		return t
	}
	t.it, t.err = l.db.NewIter(&pebble.IterOptions{
		LowerBound: eventKey(from),
		UpperBound: eventKey(t.limit + 1),
	})
	if t.err != nil {
		t.err = orErr(t.err, nil)
		t.done = true
	}
	return t
}

// ReadTransient is Read for a caller that copies what it keeps: the
// event Event returns, its strings and its Payload, are valid only until
// the next call to Next or Close, because they alias the storage engine's
// memory instead of a copy of their own. Every check Read makes is made;
// only the copy of each record is saved.
func (l *Log) ReadTransient(from uint64) *Iterator {
	t := l.Read(from)
	t.transient = true
	return t
}

// ReadChained is Read checking, as Verify does, that each record's hash
// chains to the record before it: for a reader that folds the log to answer
// for it (the start-up's fold of the tail after a snapshot, the offline
// replay), which must not build on a record whose checksum holds but which
// the writer did not write there. From a position past 1 the chain starts
// at the stored hash of the record before from, which that record's
// checksum covers.
func (l *Log) ReadChained(from uint64) *Iterator { return l.chained(l.Read(from), from) }

// ReadChainedTransient is ReadChained for a caller that copies what it
// keeps, as ReadTransient is Read's.
func (l *Log) ReadChainedTransient(from uint64) *Iterator {
	return l.chained(l.ReadTransient(from), from)
}

// chained makes t, which reads from position from, check the hash chain.
func (l *Log) chained(t *Iterator, from uint64) *Iterator {
	if t.done {
		return t
	}
	t.chain = true
	if from := max(from, 1); from > 1 {
		rec, err := l.recordBelowHead(from - 1)
		if err == nil {
			if err = checkRecord(rec); err != nil {
				err = corruptf(from-1, eventKey(from-1), "%v", err)
			}
		}
		if err != nil {
			t.finish(err)
			return t
		}
		t.prev = recordHash(rec)
	}
	return t
}

// ReadStream returns an iterator over the durable events of one stream, from
// stream version from (1 for all), in version order.
func (l *Log) ReadStream(stream string, from uint64) *Iterator {
	if from == 0 {
		from = 1
	}
	t := &Iterator{stream: stream, want: from, limit: l.durable.Load().Position}
	if t.err = l.readable(); t.err != nil {
		t.done = true
		return t
	}
	prefix := appendStreamPrefix(nil, stream)
	t.idx, t.err = l.db.NewIter(&pebble.IterOptions{
		LowerBound: prefix,
		UpperBound: prefixUpper(prefix),
	})
	if t.err == nil {
		t.it, t.err = l.db.NewIter(&pebble.IterOptions{
			LowerBound: eventKey(1),
			UpperBound: eventKey(t.limit + 1),
		})
	}
	if t.err != nil {
		t.err = orErr(t.err, nil)
		t.done = true
	}
	return t
}

// ReadStreamTransient is ReadStream for a caller that copies what it keeps,
// as ReadTransient is Read's: the event Event returns, its strings and its
// Payload, are valid only until the next call to Next or Close. Every check
// ReadStream makes is made.
func (l *Log) ReadStreamTransient(stream string, from uint64) *Iterator {
	t := l.ReadStream(stream, from)
	t.transient = true
	return t
}

// Next advances to the next event and reports whether there is one.
func (t *Iterator) Next() bool {
	if t.done {
		return false
	}
	if t.idx != nil {
		return t.nextInStream()
	}
	var ok bool
	if !t.primed {
		ok, t.primed = t.it.First(), true
	} else {
		ok = t.it.Next()
	}
	if !ok {
		if err := t.it.Error(); err != nil {
			return t.finish(orErr(err, nil))
		}
		if t.want <= t.limit {
			return t.finish(corruptf(t.want, eventKey(t.want), "missing record below the durable head %d", t.limit))
		}
		return t.finish(nil)
	}
	if err := t.load(t.want); err != nil {
		return t.finish(err)
	}
	t.want++
	return true
}

func (t *Iterator) nextInStream() bool {
	for t.entryI >= len(t.entry) {
		if !t.nextEntry() {
			return false
		}
	}
	ver, pos := t.entryV+uint64(t.entryI), t.entry[t.entryI]
	t.entryI++
	if pos > t.limit {
		// Indexed by an append that is not durable yet.
		return t.finish(nil)
	}
	k := t.idx.Key()
	if !t.it.SeekGE(eventKey(pos)) {
		return t.finish(orErr(t.it.Error(), corruptf(pos, k, "index points to a missing record")))
	}
	if err := t.load(pos); err != nil {
		return t.finish(err)
	}
	if t.ev.Stream != t.stream || t.ev.StreamVersion != ver {
		return t.finish(corruptf(pos, k, "index entry points to %q version %d", t.ev.Stream, t.ev.StreamVersion))
	}
	t.want++
	return true
}

// nextEntry moves to the next index entry holding t.want. The first call
// seeks to the entry that covers the starting version.
func (t *Iterator) nextEntry() bool {
	var ok bool
	if !t.primed {
		t.primed = true
		if ok = t.idx.SeekLT(appendStreamKey(nil, t.stream, t.want+1)); !ok {
			ok = t.idx.First()
		}
	} else {
		ok = t.idx.Next()
	}
	if !ok {
		return t.finish(orErr(t.idx.Error(), nil))
	}
	k := t.idx.Key()
	_, first, valid := parseStreamKey(k)
	if !valid {
		return t.finish(corruptf(0, k, "malformed stream index key"))
	}
	v, err := t.idx.ValueAndErr()
	if err != nil {
		return t.finish(orErr(err, nil))
	}
	t.entry, err = decodePositions(k, v, t.entry[:0])
	if err != nil {
		return t.finish(err)
	}
	last := first + uint64(len(t.entry)) - 1
	switch {
	case last < t.want:
		// Only the entry before the start: nothing more to read.
		t.entry = t.entry[:0]
		return true
	case first > t.want:
		return t.finish(corruptf(0, k, "stream %q index is not contiguous: want version %d", t.stream, t.want))
	}
	t.entryV, t.entryI = first, int(t.want-first)
	return true
}

// load decodes the record under t.it, which must be at position pos.
func (t *Iterator) load(pos uint64) error {
	k := t.it.Key()
	if len(k) != 9 || k[0] != prefixEvent || string(k) != string(eventKey(pos)) {
		return corruptf(pos, k, "missing record at position %d (gap)", pos)
	}
	v, err := t.it.ValueAndErr()
	if err != nil {
		return orErr(err, nil)
	}
	decode := DecodeRecord
	if t.transient {
		decode = decodeRecordTransient
	}
	if err := decode(v, &t.ev); err != nil {
		return &CorruptError{Position: pos, Key: keyString(k), Reason: err.Error()}
	}
	if t.ev.Position != pos {
		return corruptf(pos, k, "record says position %d", t.ev.Position)
	}
	if t.chain {
		if chainHash(&t.prev, recordBody(v)) != t.ev.Hash {
			return corruptf(pos, k, "hash chain broken")
		}
		t.prev = t.ev.Hash
	}
	return nil
}

func (t *Iterator) finish(err error) bool {
	if err != nil && t.err == nil {
		t.err = err
	}
	t.done = true
	return false
}

// Event returns the current event. The struct behind the pointer is reused
// by Next; a copy of it (*it.Event()) stays valid for good, because its
// strings and Payload live in a buffer of their own that nothing mutates
// (except for an iterator of ReadTransient or ReadStreamTransient: see
// there).
func (t *Iterator) Event() *Event { return &t.ev }

// Err returns the first error met, if any.
func (t *Iterator) Err() error { return t.err }

// Close releases the iterator and returns Err (or a close error).
func (t *Iterator) Close() error {
	t.done = true
	for _, it := range []*pebble.Iterator{t.it, t.idx} {
		if it != nil {
			if err := it.Close(); err != nil && t.err == nil {
				t.err = orErr(err, nil)
			}
		}
	}
	t.it, t.idx = nil, nil
	return t.err
}
