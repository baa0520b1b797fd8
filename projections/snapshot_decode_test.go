package projections

import (
	"bytes"
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
	same(&snapshotRun{Tasks: []*Task{nil, {}}, Delegations: []*Delegation{nil}, Accounts: []*Account{nil}, Messages: []Message{}})
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
		want, format, err := decodeSnapshotByReflection(b)
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
		b, err := appendSnapshot(m.Uint16(nil, SnapshotFormat), &snap)
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
			check(t, view, func(b []byte) (*snapshotRun, error) { return decodeRunViewByReflection(b, id) })
		})
	}
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
