package eventlog

import (
	"encoding/binary"
	"fmt"
)

// The stream index has one entry per (append, stream), not one per event:
// every key costs in the memtable, the WAL and compactions, and a command's
// events usually go to one run. An entry covers the consecutive versions
// that one append gave the stream:
//
//	key   's' | uvarint len | stream | firstVersion:8 BE
//	value uvarint n | uvarint pos_1 | uvarint (pos_2 - pos_1) | … | uvarint (pos_n - pos_n-1)
//
// Positions within an entry strictly increase, so every delta is ≥ 1.

// indexRun collects, during an append, the positions one stream receives.
type indexRun struct {
	first     uint64
	positions []uint64
}

func appendIndexValue(dst []byte, positions []uint64) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(positions)))
	prev := uint64(0)
	for _, p := range positions {
		dst = binary.AppendUvarint(dst, p-prev)
		prev = p
	}
	return dst
}

// decodePositions appends the positions of an index entry to dst.
func decodePositions(key, value []byte, dst []uint64) ([]uint64, error) {
	n, w := binary.Uvarint(value)
	if w <= 0 || n == 0 || n > uint64(len(value)) {
		return nil, corruptf(0, key, "index entry has a bad count")
	}
	value = value[w:]
	prev := uint64(0)
	for i := uint64(0); i < n; i++ {
		d, w := binary.Uvarint(value)
		if w <= 0 || d == 0 || prev+d < prev {
			return nil, corruptf(0, key, "index entry has a bad position delta")
		}
		value = value[w:]
		prev += d
		dst = append(dst, prev)
	}
	if len(value) != 0 {
		return nil, corruptf(0, key, "index entry has %d trailing bytes", len(value))
	}
	return dst, nil
}

// lastVersionOf returns the last version covered by an index entry.
func lastVersionOf(key, value []byte) (uint64, error) {
	_, first, ok := parseStreamKey(key)
	if !ok {
		return 0, corruptf(0, key, "malformed stream index key")
	}
	n, w := binary.Uvarint(value)
	if w <= 0 || n == 0 {
		return 0, fmt.Errorf("%w: index entry %s has a bad count", ErrCorrupt, keyString(key))
	}
	return first + n - 1, nil
}
