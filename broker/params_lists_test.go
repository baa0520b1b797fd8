package broker

import (
	"encoding/json"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
)

// strsDecodedWhole is how params.strs read a list before it was bounded first: the whole array decoded, then
// refused past its count. The answers of strs are held to it.
func strsDecodedWhole(p *params, key string, n, max int) []string {
	v, ok := p.get(key)
	if !ok {
		return nil
	}
	var out []string
	if v[0] != '[' || json.Unmarshal(v, &out) != nil || len(out) > n || slices.ContainsFunc(out, func(s string) bool {
		return s == "" || utf8.RuneCountInString(s) > max
	}) {
		p.fail(key, "an array of at most "+itoa(int64(n))+" strings of 1.."+itoa(int64(max))+" chars")
		return nil
	}
	return out
}

// hugeList is a list of count one-char strings, then last: a frame's worth of them is what a hostile worker sends.
func hugeList(count int, last string) string {
	return "[" + strings.Repeat(`"a",`, count) + last + "]"
}

// TestAListParamIsRefusedBeforeItIsDecoded: a list param past its count (events.subscribe's types past MaxTypeFilter,
// query.runs' status past 16) is refused without decoding its elements: 60,000 one-char strings, a 240 KB frame,
// cost megabytes of slices and strings per request when decoded whole before the count was checked — and so did
// such a list behind one element that is no string, which json.Unmarshal goes on decoding past. The refusal is the
// one the whole list got.
func TestAListParamIsRefusedBeforeItIsDecoded(t *testing.T) {
	for _, tc := range []struct{ name, list string }{
		{"strings", hugeList(60000, `"a"`)},
		{"a number first", "[7," + hugeList(60000, `"a"`)[1:]},
		{"a number last", hugeList(60000, `7`)},
		{"nulls", "[" + strings.Repeat(`null,`, 60000) + "null]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := readParams(&call{method: "events.subscribe", params: []byte(`{"types":` + tc.list + `}`)})
			require.NoError(t, p.err)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			require.Nil(t, p.strs("types", MaxTypeFilter, MaxTypeLen))
			runtime.ReadMemStats(&after)
			require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(16<<10), "bytes allocated to refuse the list")
			var e *wire.Error
			require.ErrorAs(t, p.err, &e)
			require.Equal(t, wire.CodeBadParams, e.Code)
			require.Equal(t,
				"events.subscribe: invalid params: types must be an array of at most 64 strings of 1..128 chars",
				e.Message)
		})
	}
}

// TestStrsAnswersAsTheWholeListDid: whatever a list holds — within its count or past it, strings, nulls, numbers,
// nested values, escapes, spaces — strs answers what decoding it whole answered: the same strings, or the same
// refusal.
func TestStrsAnswersAsTheWholeListDid(t *testing.T) {
	const n, max = 3, 4
	lists := []string{
		`[]`, `[ ]`, `["a"]`, `["a","b","c"]`, `[ "a" , "b" ,"c" ]`, "[\n\t\"a\",\r\"\\u00e9\"]", `["a","b","c","d"]`,
		`["a","b","c",1]`, `["a",null]`, `[null]`, `["a",""]`, `["abcd"]`, `["abcde"]`, `["éééé"]`, `["ééééé"]`,
		`["a",["b"]]`, `[{"a":"]"},"b"]`, `["a",true]`, `[false,"a","b","c"]`, `["\"","\\","]"]`, `["[", "]", ","]`,
		`[1]`, `[-1.5e3]`, `"a"`, `{"a":"b"}`, `7`, `true`, `null`,
		hugeList(60000, `"a"`), hugeList(60000, `7`), hugeList(60000, `null`), hugeList(2, `"a"`), hugeList(3, `"a"`),
		hugeList(2, `7`), hugeList(2, `null`), "[7," + hugeList(60000, `"a"`)[1:], `[7,"a","b","c","d"]`,
		`[["a"],"b","c","d"]`, `[{},"b"]`,
	}
	for _, list := range lists {
		b := []byte(`{"k":` + list + `}`)
		got, want := readParams(&call{method: "m", params: b}), readParams(&call{method: "m", params: b})
		name := list
		if len(name) > 40 {
			name = name[:40] + "…"
		}
		require.Equal(t, strsDecodedWhole(want, "k", n, max), got.strs("k", n, max), "%s", name)
		require.Equal(t, want.err, got.err, "%s", name)
	}
}
