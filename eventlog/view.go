package eventlog

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// Stream views: one opaque value per stream, stamped with a position of
// that stream, that the caller derives from the stream's events (crewlog
// keeps the read model of a run that left memory there, so a query for it
// reads one value instead of re-folding the run, and the newest import
// checkpoint of every file, so a follower's start does not fold every
// checkpoint ever written):
//
//	key   'v' | uvarint len | stream
//	value sealed [pos:8 BE | data]
//
// A view is derived data, like a snapshot: it is an optimisation only,
// never trusted over the log, and followed by a sync only so that a write
// error fails the log stop (SaveView). Its position says which prefix of
// the stream it reflects; a reader uses it only when that is the prefix it
// wants, and otherwise rebuilds from the events.
// Builds that predate views ignore the keys (the store format is
// unchanged); Verify checks their seal and that the position is one of the
// stream's, not beyond the head.
const prefixView = 'v'

func viewKey(stream string) []byte {
	k := make([]byte, 0, 1+binary.MaxVarintLen64+len(stream))
	k = append(k, prefixView)
	k = binary.AppendUvarint(k, uint64(len(stream)))
	return append(k, stream...)
}

// parseViewKey returns the stream of a view key; ok is false for a
// malformed key.
func parseViewKey(k []byte) (stream string, ok bool) { return parsePrefixedName(k, prefixView) }

// SaveView stores data as the view of stream at pos (a position of the
// stream, at most the durable head), replacing any older view of the
// stream. It is followed by a sync it does not wait for, awaited by the
// next write: not for the view's sake (derived data, which a crash may
// lose) but so that a write error fails the log stop (derivedSync).
// Nothing is written to a read-only log (ErrReadOnly), nor to one that
// failed stop (ErrFailed): its WAL keeps the write error, and Pebble panics
// on a write that meets it.
func (l *Log) SaveView(stream string, pos uint64, data []byte) error {
	if l.opts.ReadOnly {
		return ErrReadOnly
	}
	if err := l.refusal(); err != nil {
		return err
	}
	if h := l.durable.Load().Position; pos == 0 || pos > h {
		return fmt.Errorf("%w: view position %d is outside 1..%d", ErrInvalid, pos, h)
	}
	if len(stream) == 0 || len(stream) > MaxIDLen {
		return fmt.Errorf("%w: view of a stream name of %d bytes", ErrInvalid, len(stream))
	}
	key := viewKey(stream)
	b := l.db.NewBatchWithSize(len(key) + 5 + 8 + len(data) + 32)
	defer b.Close()
	op := b.SetDeferred(len(key), 5+8+len(data))
	copy(op.Key, key)
	binary.BigEndian.PutUint64(op.Value[5:13], pos)
	copy(op.Value[13:], data)
	sealInPlace(op.Value)
	if err := op.Finish(); err != nil {
		return fmt.Errorf("eventlog: save view: %w", err)
	}
	if err := l.applyDerived(b); err != nil {
		return fmt.Errorf("eventlog: save view: %w", err)
	}
	return nil
}

// View returns the view of stream and the position it was saved at. It
// returns an error wrapping ErrNotFound when there is none, and one
// wrapping ErrCorrupt when the stored view fails its checksum or names a
// position beyond the durable head (the caller then rebuilds from the
// log). data is the caller's.
func (l *Log) View(stream string) (pos uint64, data []byte, err error) {
	err = l.ViewFunc(stream, func(p uint64, d []byte) error {
		pos, data = p, append([]byte(nil), d...)
		return nil
	})
	return pos, data, err
}

// ViewFunc is View without the copy: read gets the view's position and
// bytes, which are Pebble's and valid only until it returns, and its error
// is ViewFunc's. A view is read whole to be decoded, and the copy of a long
// run's (hundreds of kilobytes) was a fresh allocation on every first read
// of the run. read is not called when View would return an error.
func (l *Log) ViewFunc(stream string, read func(pos uint64, data []byte) error) error {
	if err := l.readable(); err != nil {
		return err
	}
	key := viewKey(stream)
	v, closer, err := l.db.Get(key)
	if isNotFound(err) {
		return fmt.Errorf("%w: no view of stream %q", ErrNotFound, stream)
	}
	if err != nil {
		return orErr(err, nil)
	}
	defer closer.Close()
	pos, p, err := decodeView(key, v)
	if err != nil {
		return err
	}
	if pos > l.durable.Load().Position {
		return corruptf(0, key, "view at %d is beyond the head", pos)
	}
	return read(pos, p)
}

func decodeView(key, v []byte) (uint64, []byte, error) {
	p, err := unseal(key, v)
	if err != nil {
		return 0, nil, err
	}
	if len(p) < 8 {
		return 0, nil, corruptf(0, key, "view of %d bytes has no position", len(p))
	}
	pos := binary.BigEndian.Uint64(p)
	if pos == 0 {
		return 0, nil, corruptf(0, key, "view at position 0")
	}
	return pos, p[8:], nil
}

// verifyViews checks every stream view: its key, its seal, and that its
// position is one of its stream's positions.
func verifyViews(snap *pebble.Snapshot, streams streamVersions) (int, error) {
	return eachKey(snap, prefixView, func(k, v []byte) error {
		stream, ok := parseViewKey(k)
		if !ok {
			return corruptf(0, k, "malformed view key")
		}
		pos, _, err := decodeView(k, v)
		if err != nil {
			return err
		}
		if _, found := slices.BinarySearch(streams.positions(stream), pos); !found {
			return corruptf(pos, k, "view of stream %q at position %d, which is not one of the stream's", stream, pos)
		}
		return nil
	})
}
