package projections

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

// encodeSnapshotByReflection is EncodeSnapshot as msgpack's reflection
// encoder writes it: the reference appendSnapshot must agree with.
func encodeSnapshotByReflection(t *testing.T, s *State) []byte {
	t.Helper()
	snap := toSnapshot(s)
	flattenMessages(&snap)
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	require.NoError(t, enc.EncodeUint16(SnapshotFormat))
	require.NoError(t, enc.Encode(&snap))
	return buf.Bytes()
}

// flattenMessages gives every hot run of snap its messages as the slice
// msgpack's reflection encodes, in place of its log.
func flattenMessages(snap *snapshot) {
	for i := range snap.Runs {
		if sr := &snap.Runs[i]; sr.msgs != nil {
			sr.Messages, sr.msgs = sr.msgs.all(), nil
		}
	}
}

// TestSnapshotEncoderMatchesReflection holds the snapshot encoder to the
// bytes of msgpack's reflection encoder: for the states of folded histories
// (hot and cold runs), and for every record type at the zero value and with
// every field filled at random (nil and non-nil pointers and slices, short
// and long strings, negative and large numbers).
func TestSnapshotEncoderMatchesReflection(t *testing.T) {
	for _, s := range []*State{New(), fold(realisticHistory(5_000)), coldState(t)} {
		want := encodeSnapshotByReflection(t, s)
		got, err := EncodeSnapshot(s)
		require.NoError(t, err)
		require.Equal(t, want, got)
		// The encoder writes the same bytes (snapshot_encoder_test.go).
		var buf bytes.Buffer
		_, err = NewSnapshotEncoder(s).WriteTo(&buf)
		require.NoError(t, err)
		require.Equal(t, want, buf.Bytes())
	}

	rng := rand.New(rand.NewPCG(1, 2))
	same := func(v any, appendTo func([]byte) ([]byte, error)) {
		t.Helper()
		want, err := msgpack.Marshal(v)
		require.NoError(t, err)
		got, err := appendTo([]byte{0xff})
		require.NoError(t, err)
		require.Equal(t, want, got[1:], "%T", v)
	}
	check := func(tk *Task, d *Delegation, a *Account, msg *Message, sr *snapshotRun) {
		t.Helper()
		same(tk, func(b []byte) ([]byte, error) { return appendTask(b, tk) })
		same(d, func(b []byte) ([]byte, error) { return appendDelegation(b, d), nil })
		same(a, func(b []byte) ([]byte, error) { return appendAccount(b, a), nil })
		same(msg, func(b []byte) ([]byte, error) { return appendMessage(b, msg) })
		same(sr, func(b []byte) ([]byte, error) { return appendSnapshotRun(b, sr, nil) })
	}
	check(&Task{}, &Delegation{}, &Account{}, &Message{}, &snapshotRun{})
	check(nil, nil, nil, &Message{}, &snapshotRun{Tasks: []*Task{nil}, Delegations: []*Delegation{nil},
		Accounts: []*Account{nil}})
	for range 300 {
		var (
			tk  Task
			d   Delegation
			a   Account
			msg Message
			sr  snapshotRun
		)
		for _, v := range []any{&tk, &d, &a, &msg, &sr} {
			fillRandom(rng, reflect.ValueOf(v).Elem())
		}
		check(&tk, &d, &a, &msg, &sr)
	}
}

// coldState is a folded history with its ended runs made cold.
func coldState(t *testing.T) *State {
	t.Helper()
	s := fold(realisticHistory(3_000))
	n := 0
	for id, r := range s.runs {
		if r.run.Status.Stale() {
			s.Evict(id)
			n++
		}
	}
	require.Positive(t, n, "no run ended")
	return s
}

// fillRandom sets every field reachable from v at random; a pointer or a
// slice is left nil a third of the time.
func fillRandom(rng *rand.Rand, v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(strings.Repeat("x", []int{0, 1, 31, 32, 255, 256, 70_000}[rng.IntN(7)]))
	case reflect.Bool:
		v.SetBool(rng.IntN(2) == 1)
	case reflect.Int, reflect.Int64:
		v.SetInt([]int64{0, 1, -1, 127, 128, -33, 1 << 20, -1 << 40, int64(rng.Uint64())}[rng.IntN(9)])
	case reflect.Uint64:
		v.SetUint([]uint64{0, 1, 255, 1 << 40, rng.Uint64()}[rng.IntN(5)])
	case reflect.Uint32:
		v.SetUint(uint64(rng.Uint32()))
	case reflect.Float64:
		v.SetFloat([]float64{0, 1.5, -3, rng.Float64() * 1e9}[rng.IntN(4)])
	case reflect.Pointer:
		if rng.IntN(3) == 0 {
			v.SetZero()
			return
		}
		p := reflect.New(v.Type().Elem())
		fillRandom(rng, p.Elem())
		v.Set(p)
	case reflect.Slice:
		if rng.IntN(3) == 0 {
			v.SetZero()
			return
		}
		n := rng.IntN(4)
		sl := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fillRandom(rng, sl.Index(i))
		}
		v.Set(sl)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillRandom(rng, v.Field(i))
			}
		}
	default:
		panic("fillRandom: add " + v.Kind().String())
	}
}

// TestEncodingARunCopiesNoMessage: a hot run's record in a snapshot or a
// view reads the messages from the run's own log: it allocates far less
// than a copy of them.
func TestEncodingARunCopiesNoMessage(t *testing.T) {
	s := fold(longRunHistory(7_000))
	require.Len(t, s.runs, 1)
	for _, r := range s.runs {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		sr := snapshotRunOf(r)
		runtime.ReadMemStats(&after)
		copied := uint64(r.msgs.Len()) * uint64(unsafe.Sizeof(Message{}))
		require.Less(t, after.TotalAlloc-before.TotalAlloc, copied/4,
			"allocated, against %d bytes of messages", copied)
		got, err := appendSnapshotRun(nil, &sr, nil)
		require.NoError(t, err)
		flat := snapshotRun{Run: sr.Run, Last: sr.Last, Tasks: sr.Tasks, Delegations: sr.Delegations,
			Accounts: sr.Accounts, Messages: r.msgs.all(), Asks: sr.Asks, Credentials: sr.Credentials,
			RootSpent: sr.RootSpent, Jobs: sr.Jobs, RevokedRoots: sr.RevokedRoots}
		want, err := msgpack.Marshal(&flat)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
}
