package projections

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	m "github.com/crewlog/crewlog/events/msgpackappend"
)

// TestSnapshotRunFastDecodeMatchesReflection holds decodeSnapshotRun to
// what msgpack's reflection decodes from the same bytes: on every run of
// folded histories (hot and cold), and on runs with every record and field
// filled at random (nil and empty slices, nil records, strings across every
// length class, negative and large numbers). The fast path must take every
// one of them on (a fallback would hide a field it does not read), and hand
// anything it does not know to reflection.
func TestSnapshotRunFastDecodeMatchesReflection(t *testing.T) {
	same := func(sr *snapshotRun) {
		t.Helper()
		b, err := appendSnapshotRun(nil, sr, nil)
		require.NoError(t, err)
		var want snapshotRun
		require.NoError(t, msgpack.Unmarshal(b, &want))
		got, err := decodeSnapshotRun(b)
		require.NoError(t, err, "the fast path fell back")
		require.Equal(t, &want, got)
	}
	for _, s := range []*State{fold(realisticHistory(5_000)), coldState(t)} {
		require.NotEmpty(t, s.runs)
		for _, id := range runIDs(t, s) {
			if r := s.runs[id]; r != nil {
				sr := snapshotRunOf(r)
				same(&sr)
			}
		}
	}
	same(&snapshotRun{})
	same(&snapshotRun{Tasks: []*Task{nil, {}}, Delegations: []*Delegation{nil}, Accounts: []*Account{nil},
		Messages: []Message{}})
	rng := rand.New(rand.NewPCG(3, 4))
	for range 300 {
		var sr snapshotRun
		fillRandom(rng, reflect.ValueOf(&sr).Elem())
		same(&sr)
	}

	// A key it does not read, or a value of another msgpack type, is left
	// to reflection.
	b, err := appendSnapshotRun(nil, &snapshotRun{}, nil)
	require.NoError(t, err)
	b[0]++ // one more entry in the map
	_, err = decodeSnapshotRun(m.Int(m.String(b, "later"), 1))
	require.ErrorIs(t, err, errFastFallback)
	b, err = appendSnapshotRun(nil, &snapshotRun{Last: 7}, nil)
	require.NoError(t, err)
	i := len(m.String(m.String(m.MapLen(nil, 13), "run"), "")) - 1 // after the run's nil
	require.Equal(t, byte(0xc0), b[i])
	i += 1 + len(m.String(nil, "last"))
	require.Equal(t, byte(0xcf), b[i], "last is a uint64")
	b[i] = 0xcb // now a double
	_, err = decodeSnapshotRun(b)
	require.ErrorIs(t, err, errFastFallback)
}

// The whole snapshot's fast path decodes exactly what reflection decodes,
// with no fallback, and leaves to reflection what it does not know.
func TestSnapshotFastDecodeMatchesReflection(t *testing.T) {
	same := func(b []byte) {
		t.Helper()
		want, format, err := decodeByReflection[snapshot](b)
		require.NoError(t, err)
		require.Equal(t, uint16(SnapshotFormat), format)
		got, err := decodeSnapshotFields(b[3:])
		require.NoError(t, err, "the fast path fell back")
		require.Equal(t, want, got)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for _, s := range []*State{New(), fold(realisticHistory(5_000)), coldState(t), fold(randomHistory(rng, 400))} {
		b, err := EncodeSnapshot(s)
		require.NoError(t, err)
		same(b)
	}
	for range 100 {
		var snap snapshot
		fillRandom(rng, reflect.ValueOf(&snap).Elem())
		b, err := appendSnapshot(m.Uint16(nil, SnapshotFormat), &snap, nil)
		require.NoError(t, err)
		same(b)
	}

	b, err := EncodeSnapshot(fold(realisticHistory(200)))
	require.NoError(t, err)
	b[3]++ // one more entry in the top map
	_, err = decodeSnapshotFields(m.Int(m.String(b[3:], "later"), 1))
	require.ErrorIs(t, err, errFastFallback)
	// A runs array longer than the bytes left is refused before it is
	// allocated.
	_, err = decodeSnapshotFields([]byte{0x81, 0xa4, 'r', 'u', 'n', 's', 0xdd, 0xff, 0xff, 0xff, 0xff})
	require.ErrorIs(t, err, errFastFallback)
}

// A view is decoded from Pebble's own bytes (eventlog.Log.ViewFunc), which
// are reused once the read returns: neither the fast path nor reflection
// may keep any of them.
func TestRunViewDecodersKeepNoByteOfTheirInput(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	check := func(t *testing.T, b []byte, decode func([]byte) (*snapshotRun, error)) {
		t.Helper()
		want, err := decode(bytes.Clone(b))
		require.NoError(t, err)
		got, err := decode(b)
		require.NoError(t, err)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		require.Equal(t, want, got)
	}
	s := fold(realisticHistory(2_000))
	for _, id := range runIDs(t, s) {
		r := s.runs[id]
		if r == nil {
			continue
		}
		sr := snapshotRunOf(r)
		b, err := appendSnapshotRun(nil, &sr, nil)
		require.NoError(t, err)
		t.Run(id+"/fast", func(t *testing.T) { check(t, bytes.Clone(b), decodeSnapshotRun) })
		view := m.Uint16(nil, SnapshotFormat)
		view = append(view, b...)
		t.Run(id+"/reflection", func(t *testing.T) {
			check(t, view, func(b []byte) (*snapshotRun, error) {
				sr, _, err := decodeByReflection[snapshotRun](b)
				return sr, err
			})
		})
	}
	// Records filled at random: every field set, also those a realistic
	// history leaves empty.
	for i := range 50 {
		var sr snapshotRun
		fillRandom(rng, reflect.ValueOf(&sr).Elem())
		b, err := appendSnapshotRun(nil, &sr, nil)
		require.NoError(t, err)
		t.Run(fmt.Sprintf("random-%d", i), func(t *testing.T) { check(t, b, decodeSnapshotRun) })
	}
}

// Whatever the fast path decodes, reflection decodes the same: a key met
// twice, a length the bytes cannot back, a value nested deeper than a
// whole snapshot may be, all fall back (and reflection then decides).
func TestFastPathFallsBackWhereReflectionDiffers(t *testing.T) {
	run := func(entries ...[]byte) []byte {
		b := m.MapLen(nil, len(entries))
		for _, e := range entries {
			b = append(b, e...)
		}
		return b
	}
	entry := func(key string, value []byte) []byte { return append(m.String(nil, key), value...) }
	runRecord := m.String(m.String(m.MapLen(nil, 1), "runId"), "R")
	message := func(data []byte) []byte {
		return append(m.String(m.String(m.MapLen(nil, 2), "id"), "m1"), entry("data", data)...)
	}
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"a run key twice", run(entry("run", runRecord), entry("run", []byte{0xc0}))},
		{"a message's data key twice", run(entry("run", runRecord), entry("messages", append(m.ArrayLen(nil, 1),
			message(append(m.String(m.String(m.MapLen(nil, 2), "subId"), "S1"),
				entry("subId", m.String(nil, "S2"))...))...)))},
		{"the messages key twice", run(entry("messages", m.ArrayLen(nil, 0)), entry("messages", []byte{0xc0}))},
		{"more messages than bytes", run(entry("run", runRecord), entry("messages", m.ArrayLen(nil, 2)),
			entry("noView", []byte{0xc2}))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeSnapshotRun(tc.b)
			require.ErrorIs(t, err, errFastFallback)
		})
	}

	// Nesting: a record handed to reflection holds an unknown key whose
	// value is n arrays deep. At the smallest n a check of the whole input
	// refuses, the fast path falls back; one less, both decode. For a run
	// record (a view's run map), a task's waiting marker (a run map, the
	// tasks array, a task's map), and a whole snapshot's config (its map).
	nested := func(prefix []byte, n int) []byte { // {prefix fields..., "later": [[...nil]]}, prefix a map's fields
		b := append(m.MapLen(nil, 2), prefix...)
		b = m.String(b, "later")
		for range n {
			b = m.ArrayLen(b, 1)
		}
		return append(b, 0xc0)
	}
	for _, tc := range []struct {
		name   string
		build  func(n int) []byte
		whole  func(b []byte) error
		decode func(b []byte) error
	}{
		{"a view's run record", func(n int) []byte {
			return run(entry("run", nested(m.String(m.String(nil, "runId"), "R"), n)))
		},
			func(b []byte) error { return checkMsgpack(b, 1) },
			func(b []byte) error { _, err := decodeSnapshotRun(b); return err }},
		{"a task's waiting marker", func(n int) []byte {
			task := append(m.MapLen(nil, 1), entry("waiting",
				nested(m.String(m.String(nil, "questionId"), "q"), n))...)
			return run(entry("tasks", append(m.ArrayLen(nil, 1), task...)))
		},
			func(b []byte) error { return checkMsgpack(b, 1) },
			func(b []byte) error { _, err := decodeSnapshotRun(b); return err }},
		{"a snapshot's run record", func(n int) []byte {
			sr := run(entry("run", nested(m.String(m.String(nil, "runId"), "R"), n)))
			return run(entry("runs", append(m.ArrayLen(nil, 1), sr...)))
		},
			func(b []byte) error { return checkMsgpack(append(m.Uint16(nil, SnapshotFormat), b...), 2) },
			func(b []byte) error { _, err := decodeSnapshotFields(b); return err }},
		{"a snapshot's config", func(n int) []byte {
			return run(entry("config", nested(m.Int(m.String(nil, "maxSlots"), 2), n)))
		},
			func(b []byte) error { return checkMsgpack(append(m.Uint16(nil, SnapshotFormat), b...), 2) },
			func(b []byte) error { _, err := decodeSnapshotFields(b); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			for tc.whole(tc.build(n)) == nil {
				n++
				require.Less(t, n, 2*maxSnapshotDepth)
			}
			require.ErrorIs(t, tc.decode(tc.build(n)), errFastFallback, "nested %d deep, past the bound", n)
			require.NoError(t, tc.decode(tc.build(n-1)), "nested %d deep, within the bound", n-1)
		})
	}
}

// What crewlog writes never needs reflection: neither a snapshot nor a
// view falls back.
func TestWhatCrewlogWritesTakesTheFastPath(t *testing.T) {
	before := reflectionDecodes.Load()
	s := fold(realisticHistory(3_000))
	b, err := EncodeSnapshot(s)
	require.NoError(t, err)
	_, err = DecodeSnapshot(b)
	require.NoError(t, err)
	for _, id := range runIDs(t, s) {
		r := s.runs[id]
		v, err := encodeRunView(r)
		require.NoError(t, err)
		_, err = decodeRunView(v, id, r.last)
		require.NoError(t, err)
	}
	require.Equal(t, before, reflectionDecodes.Load())
}

// largeDecodeInputs are a folded run's encoding and a whole snapshot's
// fields (the snapshot without its format version): the inputs the fuzzer's
// seeds are cut from (fuzzSeedsOf), read whole by
// TestFastDecodeMatchesReflectionOnWholeEncodings.
func largeDecodeInputs(t testing.TB) [][]byte {
	s := fold(realisticHistory(12))
	var inputs [][]byte
	for _, id := range runIDs(t, s) {
		sr := snapshotRunOf(s.runs[id])
		b, err := appendSnapshotRun(nil, &sr, nil)
		require.NoError(t, err)
		inputs = append(inputs, b)
	}
	b, err := EncodeSnapshot(s)
	require.NoError(t, err)
	return append(inputs, b[3:])
}

// fuzzSeedMax is the size fuzzSeedsOf keeps a seed within, but for a single
// value larger than it.
const fuzzSeedMax = 128

// fuzzSeedsOf cuts the msgpack map b into small maps of the same keys and
// values that together hold every key of b: the values that fit go
// together, up to fuzzSeedMax bytes a map, and a larger map, or array of
// maps, is cut the same way under its key (an array to its first element).
// The fuzzer minimises every input that finds new code, removing each of
// its bytes and each of its ranges in turn, so a seed of kilobytes keeps
// it minimising; a small one of each field still reaches every field's
// decoding.
func fuzzSeedsOf(t testing.TB, b []byte) [][]byte {
	d := msgpack.NewDecoder(bytes.NewReader(b))
	n, err := d.DecodeMapLen()
	require.NoError(t, err)
	var seeds [][]byte
	var group []byte
	groupLen := 0
	flush := func() {
		if groupLen > 0 {
			seeds = append(seeds, append(m.MapLen(nil, groupLen), group...))
		}
		group, groupLen = nil, 0
	}
	for range n {
		key, err := d.DecodeRaw()
		require.NoError(t, err)
		value, err := d.DecodeRaw()
		require.NoError(t, err)
		entry := append(append([]byte{}, key...), value...)
		if len(entry) > fuzzSeedMax {
			if inner, isArray := firstMapOf(t, value); inner != nil {
				for _, s := range fuzzSeedsOf(t, inner) {
					if isArray {
						s = append(m.ArrayLen(nil, 1), s...)
					}
					seeds = append(seeds, append(append(m.MapLen(nil, 1), key...), s...))
				}
				continue
			}
		}
		if groupLen > 0 && len(group)+len(entry) > fuzzSeedMax {
			flush()
		}
		group, groupLen = append(group, entry...), groupLen+1
	}
	flush()
	return seeds
}

// firstMapOf returns v when it is a msgpack map, and v's first element
// (isArray) when v is an array whose first element is a map; nil otherwise.
func firstMapOf(t testing.TB, v []byte) (inner []byte, isArray bool) {
	isMap := func(c byte) bool { return c&0xf0 == 0x80 || c == 0xde || c == 0xdf }
	switch c := v[0]; {
	case isMap(c):
		return v, false
	case c&0xf0 == 0x90 || c == 0xdc || c == 0xdd:
		d := msgpack.NewDecoder(bytes.NewReader(v))
		if n, err := d.DecodeArrayLen(); err != nil || n == 0 {
			return nil, false
		}
		first, err := d.DecodeRaw()
		require.NoError(t, err)
		if isMap(first[0]) {
			return first, true
		}
	}
	return nil, false
}

// requireFastDecodeMatchesReflection: if the fast path decodes b, of a run
// or of a whole snapshot, reflection decodes the same.
func requireFastDecodeMatchesReflection(t *testing.T, b []byte) {
	if got, err := decodeSnapshotRun(b); err == nil {
		require.NoError(t, checkMsgpack(b, 1))
		var want snapshotRun
		require.NoError(t, msgpack.Unmarshal(b, &want))
		if !hasNaN(reflect.ValueOf(want)) { // NB: a NaN is not equal to itself
			require.Equal(t, &want, got)
		}
	}
	if got, err := decodeSnapshotFields(b); err == nil {
		full := append(m.Uint16(nil, SnapshotFormat), b...)
		want, _, err := decodeByReflection[snapshot](full)
		require.NoError(t, err)
		if !hasNaN(reflect.ValueOf(want)) {
			require.Equal(t, want, got)
		}
	}
}

// TestFastDecodeMatchesReflectionOnWholeEncodings: what the fuzzer's seeds
// are cut from, each taken by the fast path, decodes as reflection does;
// and the seeds are small, and each is taken by the fast path too (a seed
// that falls back fuzzes nothing of it).
func TestFastDecodeMatchesReflectionOnWholeEncodings(t *testing.T) {
	for i, b := range largeDecodeInputs(t) {
		_, runErr := decodeSnapshotRun(b)
		_, fieldsErr := decodeSnapshotFields(b)
		require.True(t, runErr == nil || fieldsErr == nil, "input %d falls back", i)
		requireFastDecodeMatchesReflection(t, b)
		seeds := fuzzSeedsOf(t, b)
		for _, s := range seeds {
			require.LessOrEqual(t, len(s), 2*fuzzSeedMax, "input %d: seed %q", i, s)
			_, runErr := decodeSnapshotRun(s)
			_, fieldsErr := decodeSnapshotFields(s)
			require.True(t, runErr == nil || fieldsErr == nil, "input %d: seed %q falls back", i, s)
		}
	}
}

// FuzzFastDecodeMatchesReflection: on any bytes the fast path decodes, of a
// run or of a whole snapshot, reflection decodes the same. The seeds are
// cut small (fuzzSeedsOf) from a folded run and a whole snapshot, which
// TestFastDecodeMatchesReflectionOnWholeEncodings reads whole.
func FuzzFastDecodeMatchesReflection(f *testing.F) {
	for _, b := range largeDecodeInputs(f) {
		for _, s := range fuzzSeedsOf(f, b) {
			f.Add(s)
		}
	}
	f.Fuzz(requireFastDecodeMatchesReflection)
}

// hasNaN reports whether v holds a floating-point NaN anywhere.
func hasNaN(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		return v.Float() != v.Float()
	case reflect.Pointer, reflect.Interface:
		return !v.IsNil() && hasNaN(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			if hasNaN(v.Field(i)) {
				return true
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if hasNaN(v.Index(i)) {
				return true
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if hasNaN(it.Value()) {
				return true
			}
		}
	}
	return false
}

// A view garbled anywhere decodes to an error or to a run, never a panic.
func TestGarbledViewsNeverPanic(t *testing.T) {
	s := fold(realisticHistory(1_000))
	for _, id := range runIDs(t, s) {
		r := s.runs[id]
		b, err := encodeRunView(r)
		require.NoError(t, err)
		got, err := decodeRunView(b, id, r.last)
		require.NoError(t, err)
		require.Equal(t, len(r.tasks), len(got.tasks))
		for i := 0; i < len(b); i += 1 + len(b)/500 {
			g := append([]byte(nil), b...)
			g[i] ^= 0x5a
			require.NotPanics(t, func() { _, _ = decodeRunView(g, id, r.last) })
			require.NotPanics(t, func() { _, _ = decodeRunView(b[:i], id, r.last) })
		}
	}
}
