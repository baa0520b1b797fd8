package eventlog

import (
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// keySource holds the sequence, in the log this one copies, of the last
// group appended by AppendFrom.
var keySource = []byte("msource")

// AppendFrom is Append for a log that is a copy of another, ordered log (a
// JetStream stream whose messages are crewlog groups): it also records
// source, the sequence of the group in that log, in the same batch. Source
// then tells where to resume copying after a restart, and a group is never
// applied twice or skipped: its sequence and its events are durable
// together or not at all.
//
// Sequences must grow; a source not above the recorded one is refused with
// ErrInvalid and leaves no trace.
func (l *Log) AppendFrom(source uint64, ws ...Write) (first uint64, err error) {
	return l.appendFrom(source, ws, true)
}

// AppendFromUnsynced is AppendFrom without waiting for the write to reach
// the disk: for a copy whose source is itself durable (a JetStream stream
// with sync_interval always), so that the copy need not pay a second fsync
// for what the source already holds. The group is atomic as with
// AppendFrom, and the WAL keeps the order of every append: a crash (of the
// process or the machine) may lose a suffix of the groups appended
// unsynced, never part of one and never one before a later synced append,
// and Source then tells where the copy resumes from the source. A group
// whose write to the WAL fails fails the log stop: the next write (this
// copy's next append) returns ErrFailed (derived_sync.go).
func (l *Log) AppendFromUnsynced(source uint64, ws ...Write) (first uint64, err error) {
	return l.appendFrom(source, ws, false)
}

func (l *Log) appendFrom(source uint64, ws []Write, sync bool) (first uint64, err error) {
	last, err := l.Source()
	if err != nil {
		return 0, err
	}
	if source <= last {
		return 0, fmt.Errorf("%w: source sequence %d is not above the recorded %d", ErrInvalid, source, last)
	}
	v := seal(binary.BigEndian.AppendUint64(nil, source))
	extra := func(b *pebble.Batch) { _ = b.Set(keySource, v, nil) }
	if !sync {
		return l.appendUnsynced(ws, extra)
	}
	return l.appendBatch(ws, nil, extra, true)
}

// Source returns the sequence recorded by the last AppendFrom (0 if none).
// It reads what Pebble holds, which may include an AppendFrom still
// waiting for its sync; the single copier that calls both never overlaps
// them.
func (l *Log) Source() (uint64, error) {
	if err := l.readable(); err != nil {
		return 0, err
	}
	return readSource(l.db)
}

// readSource reads the recorded source sequence from g (the store, or the snapshot Verify reads): 0 if none.
func readSource(g getter) (uint64, error) {
	v, closer, err := g.Get(keySource)
	if isNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, tableDamage(fmt.Errorf("eventlog: read source: %w", err))
	}
	defer closer.Close()
	p, err := unseal(keySource, v)
	if err != nil {
		return 0, err
	}
	if len(p) != 8 {
		return 0, corruptf(0, keySource, "source of %d bytes", len(p))
	}
	return binary.BigEndian.Uint64(p), nil
}

// Check refuses ws exactly as Append would now (invalid input,
// *ConflictError, ErrDuplicateCommand, a failed or closed log) and appends
// nothing. A writer that commits a group to a replicated log before
// appending it here calls Check first, so that a group this log would
// refuse never reaches the replicated log, where every copy would refuse it.
func (l *Log) Check(ws ...Write) error {
	if l.opts.ReadOnly {
		return ErrReadOnly
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.refusal(); err != nil {
		return err
	}
	if len(ws) == 0 {
		return fmt.Errorf("%w: no writes", ErrInvalid)
	}
	return l.validateWrites(ws)
}

// Outcomes calls fn with every recorded outcome (format 3), in key order:
// what a copy of the log into another backend needs besides the records,
// since an outcome that wrote no events is found nowhere else. An error
// from fn stops the walk and is returned.
func (l *Log) Outcomes(fn func(o Outcome) error) error {
	if err := l.readable(); err != nil {
		return err
	}
	_, err := eachKey(l.db, prefixOutcome, func(k, v []byte) error {
		o, err := decodeOutcome(k, v)
		if err != nil {
			return err
		}
		return fn(o)
	})
	return err
}
