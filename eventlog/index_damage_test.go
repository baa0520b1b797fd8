package eventlog

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"
)

// TestAppendRefusesADamagedIndexEntry: an append reads a stream's version, when it has none cached, from the stream's
// last index entry, and trusted that entry's count as it came. A damaged one handed out a version the stream already
// had (a count too small, or one so large that the last version wrapped to 0: the stream looked new and an append
// that expected none was accepted) or left a gap (a count too large), where Verify refuses the same entry. Every
// entry Verify's decode refuses, and one whose versions do not lie in 1..2^64-1, is now refused as damage naming
// its key, and nothing is appended.
func TestAppendRefusesADamagedIndexEntry(t *testing.T) {
	last := appendStreamKey(nil, "run", 2) // versions 2 and 3, at positions 2 and 3: [2, 2, 1]
	setValue := func(value []byte) func(t *testing.T, l *Log) []byte {
		return func(t *testing.T, l *Log) []byte {
			require.NoError(t, l.db.Set(last, value, pebble.Sync))
			return last
		}
	}
	moveTo := func(first uint64) func(t *testing.T, l *Log) []byte {
		return func(t *testing.T, l *Log) []byte {
			moved := appendStreamKey(nil, "run", first)
			value := rawGet(t, l, last)
			b := l.db.NewBatch()
			require.NoError(t, b.Delete(appendStreamKey(nil, "run", 1), nil))
			require.NoError(t, b.Delete(last, nil))
			require.NoError(t, b.Set(moved, value, nil))
			require.NoError(t, b.Commit(pebble.Sync))
			return moved
		}
	}
	cases := map[string]struct {
		damage func(t *testing.T, l *Log) []byte // returns the damaged entry's key
		expect int64                             // what the damaged entry says the stream's version is
	}{
		"count one too large":  {setValue([]byte{3, 2, 1}), 4},
		"count one too small":  {setValue([]byte{1, 2, 1}), 2},
		"count wraps the last": {setValue(append(binary.AppendUvarint(nil, math.MaxUint64), 2, 1)), NoStream},
		"count of zero":        {setValue([]byte{0, 2, 1}), Any},
		"last delta flipped": {func(t *testing.T, l *Log) []byte {
			flipLastByte(t, l, last)
			return last
		}, 3},
		"first version wraps the last": {moveTo(math.MaxUint64), NoStream},
		"first version zero":           {moveTo(0), 1},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			l, fs := openMem(t)
			_, err := l.Append(Write{Events: evs("run", 1)})
			require.NoError(t, err)
			_, err = l.Append(Write{Events: evs("run", 2)})
			require.NoError(t, err)
			key := c.damage(t, l)
			require.NoError(t, l.Close())

			l, err = Open("db", &Options{FS: fs}) // no version cached: the next append reads the index
			require.NoError(t, err)
			defer l.Close()
			_, err = l.Verify(nil)
			require.ErrorIs(t, err, ErrCorrupt, "Verify refuses the entry")

			w := Write{Expected: []Expectation{{Stream: "run", Version: c.expect}}, Events: evs("run", 1)}
			for _, refused := range []func() error{
				func() error { return l.Check(w) },
				func() error { _, err := l.Append(w); return err },
			} {
				err := refused()
				var ce *CorruptError
				require.ErrorAs(t, err, &ce)
				require.Equal(t, keyString(key), ce.Key)
			}
			head, _ := l.Head()
			require.EqualValues(t, 3, head, "nothing appended")
		})
	}
}

// TestDecodePositionsRefusesEveryMalformedEntry: an index entry is a count and that many positive deltas, nothing
// after them; each way an entry breaks that is refused with the reason that names it (a count past the bytes the
// entry holds is a bad count, not a delta missing at its end), and a sound entry gives its positions.
func TestDecodePositionsRefusesEveryMalformedEntry(t *testing.T) {
	cases := map[string]struct {
		value     []byte
		positions []uint64
		reason    string // "" when the entry is sound
	}{
		"one position":                   {value: []byte{1, 5}, positions: []uint64{5}},
		"three positions":                {value: []byte{3, 5, 1, 2}, positions: []uint64{5, 6, 8}},
		"no bytes":                       {value: nil, reason: "bad count"},
		"a count of zero":                {value: []byte{0}, reason: "bad count"},
		"a count past the deltas' bytes": {value: []byte{3, 5, 1}, reason: "bad count"},
		"a delta of zero":                {value: []byte{2, 5, 0}, reason: "bad position delta"},
		"a delta wrapping past 2^64": {value: binary.AppendUvarint([]byte{2, 5}, math.MaxUint64-1),
			reason: "bad position delta"},
		"a truncated delta":           {value: []byte{2, 5, 0x80}, reason: "bad position delta"},
		"a byte after the last delta": {value: []byte{1, 5, 7}, reason: "1 trailing bytes"},
	}
	key := appendStreamKey(nil, "run", 1)
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			positions, err := decodePositions(key, c.value, nil)
			if c.reason == "" {
				require.NoError(t, err)
				require.Equal(t, c.positions, positions)
				return
			}
			var ce *CorruptError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, keyString(key), ce.Key)
			require.Contains(t, ce.Reason, c.reason)
		})
	}
}
