package eventlog

import "encoding/binary"

// The stream index has one entry per (append, stream), not one per event:
// every key costs in the memtable, the WAL and compactions, and a command's
// events usually go to one run. An entry covers the consecutive versions
// that one append gave the stream:
//
//	key   's' | uvarint len | stream | firstVersion:8 BE
//	value uvarint n | uvarint pos_1 | uvarint (pos_2 - pos_1) | … | uvarint (pos_n - pos_n-1)
//
// Positions within an entry strictly increase, so every delta is ≥ 1.

// stagedRuns are the positions an append gives each stream, in the order
// the streams first appear, kept (with their position slices) from one
// append to the next.
type stagedRuns struct {
	byStream map[string]int // index into runs
	runs     []stagedRun
}

type stagedRun struct {
	stream    string
	first     uint64 // the stream version of the run's first position
	positions []uint64
}

// reset empties r for an append and returns it.
func (r *stagedRuns) reset() *stagedRuns {
	if len(r.runs) > maxReusedEntries {
		r.runs = nil
	}
	for i := range r.runs {
		r.runs[i].stream = ""
	}
	r.runs = r.runs[:0]
	reuseMap(&r.byStream)
	return r
}

// add appends position pos, at version v, to stream's run.
func (r *stagedRuns) add(stream string, v, pos uint64) {
	i, ok := r.byStream[stream]
	if !ok {
		i = len(r.runs)
		r.byStream[stream] = i
		if len(r.runs) < cap(r.runs) {
			r.runs = r.runs[:i+1]
			r.runs[i].stream, r.runs[i].first, r.runs[i].positions = stream, v, r.runs[i].positions[:0]
		} else {
			r.runs = append(r.runs, stagedRun{stream: stream, first: v})
		}
	}
	r.runs[i].positions = append(r.runs[i].positions, pos)
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
	// NB: at least one position, and no more than the bytes after the count,
	// since each delta takes one at least (a damaged count never sizes a
	// slice).
	n, w := binary.Uvarint(value)
	if w <= 0 || n == 0 || n > uint64(len(value)-w) {
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

// lastVersionOf returns the last version covered by an index entry, the
// stream's version when it is the stream's last. NB: an append hands out the
// versions after it, so the entry is decoded whole and refused as Verify
// refuses it: a damaged count would give a version the stream already has,
// or leave a gap, and one whose last version wrapped past 2^64-1 would make
// the stream look new.
func lastVersionOf(key, value []byte) (uint64, error) {
	_, first, ok := parseStreamKey(key)
	if !ok {
		return 0, corruptf(0, key, "malformed stream index key")
	}
	var scratch [16]uint64 // an append's events of one stream, most often
	positions, err := decodePositions(key, value, scratch[:0])
	if err != nil {
		return 0, err
	}
	last := first + uint64(len(positions)) - 1
	if first == 0 || last < first {
		return 0, corruptf(0, key, "index entry of %d versions from version %d lies outside 1..2^64-1",
			len(positions), first)
	}
	return last, nil
}
