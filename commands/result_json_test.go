package commands

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events/jsonstring/jsonref"
)

// jsonOfResults are strings and numbers at every edge of the appenders'
// fast paths: what needs escaping, HTML characters, non-ASCII and invalid
// UTF-8, line separators; floats on both sides of 1e-6 and 1e21, negative,
// zero, fractions.
var (
	jsonStrings = []string{"", "gc-3f9c", "a\"b", `back\slash`, "tab\there", "\x00\x1f\x7f", "<script>&</script>",
		"é", "日本", "\xff\xfe", "line\u2028sep\u2029", "msg_lx2k_abcdef123456", "run-inbox"}
	jsonFloats = []float64{0, math.Copysign(0, -1), 1, 900, 86400, 1.5, -2.25, 1e-6, 9.99e-7, 1e-7, 1e20, 1e21,
		123456789012345678901.0, -1e21, 5e-324, math.MaxFloat64, 0.1 + 0.2}
)

// TestResultJSONMatchesEncodingJSON holds the results that append their own
// JSON to encoding/json's bytes, field by field at every edge (from Go 1.27 up
// to the two spellings jsonref.Comparable names).
func TestResultJSONMatchesEncodingJSON(t *testing.T) {
	same := func(v any) {
		t.Helper()
		want, werr := json.Marshal(v)
		got, gerr := encodeResult(v)
		require.Equal(t, werr != nil, gerr != nil, "%#v: %v / %v", v, werr, gerr)
		require.Equal(t, string(jsonref.Comparable(want)), string(jsonref.Comparable(got)), "%#v", v)
	}
	for i, s := range jsonStrings {
		f := jsonFloats[i%len(jsonFloats)]
		same(DelegateResult{OK: i%2 == 0, GrandchildTaskRef: s, ChildDepth: i - 3, TimeoutSec: f})
		same(SettleResult{OK: i%2 == 1, SubID: s, Status: s, MessageID: s, To: s, Rerouted: i%3 == 0,
			Charged: int64(i) * -7})
	}
	for _, f := range append(jsonFloats, math.NaN(), math.Inf(1), math.Inf(-1)) {
		same(DelegateResult{OK: true, GrandchildTaskRef: "gc-1", ChildDepth: 1, TimeoutSec: f})
		same(&DelegateResult{TimeoutSec: -f})
	}
	same(SettleResult{Charged: math.MinInt64})
	same(&SettleResult{Charged: math.MaxInt64})
}

// FuzzResultJSONMatchesEncodingJSON: any strings and numbers.
func FuzzResultJSONMatchesEncodingJSON(f *testing.F) {
	for i, s := range jsonStrings {
		f.Add(s, jsonFloats[i%len(jsonFloats)], int64(i), i%2 == 0)
	}
	f.Fuzz(func(t *testing.T, s string, x float64, n int64, b bool) {
		for _, v := range []any{
			DelegateResult{OK: b, GrandchildTaskRef: s, ChildDepth: int(n), TimeoutSec: x},
			SettleResult{OK: b, SubID: s, Status: s + "x", MessageID: s, To: "t" + s, Rerouted: !b, Charged: n},
		} {
			want, werr := json.Marshal(v)
			got, gerr := encodeResult(v)
			if (werr != nil) != (gerr != nil) || string(jsonref.Comparable(want)) != string(jsonref.Comparable(got)) {
				t.Fatalf("%#v: encoding/json %q (%v), appended %q (%v)", v, want, werr, got, gerr)
			}
		}
	})
}

// TestResultJSONAppendsItsStringsInPlace: a result whose strings need escapes (non-ASCII, HTML's characters, a
// control character) appends them without an allocation, where each was json.Marshal'd apart, two allocations.
func TestResultJSONAppendsItsStringsInPlace(t *testing.T) {
	r := SettleResult{OK: true, SubID: "sub-é", Status: "done", MessageID: "msg<1>", To: "tâche\t2", Charged: 12}
	b := make([]byte, 0, 256)
	want, err := json.Marshal(r)
	require.NoError(t, err)
	b, err = r.appendJSON(b[:0])
	require.NoError(t, err)
	require.Equal(t, string(want), string(b))
	require.Zero(t, testing.AllocsPerRun(100, func() { b, _ = r.appendJSON(b[:0]) }))
}
