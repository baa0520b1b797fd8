package broker

import (
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
)

// madeUpKeys is a params object of distinct keys no method reads, as many as a frame of maxFrame holds, each spelt
// by key from its number: what a hostile worker sends to make every request of its credential cost the most.
func madeUpKeys(maxFrame int, key func(i int) string) []byte {
	b := []byte(`{"limit":1`)
	for i := 0; len(b) < maxFrame-64; i++ {
		b = fmt.Appendf(b, `,%s:0`, key(i))
	}
	return append(b, '}')
}

// madeUpKeySpellings are the spellings of made-up keys (madeUpKeys) that cost a reader the most: short ones, the most
// of them; escaped ones, each decoded; and ones each less than the one before, each the least so far (long ones
// too), with the least of them (unchecked when "").
var madeUpKeySpellings = []struct {
	name  string
	key   func(i int) string
	least string
}{
	{"plain", func(i int) string { return fmt.Sprintf(`"%x"`, i) }, "0"},
	{"escaped", func(i int) string { return fmt.Sprintf(`"\u0061%x"`, i) }, "a0"},
	{"each less than the one before", func(i int) string { return fmt.Sprintf(`"%x"`, 1<<30-i) }, ""},
	{"long, each less than the one before",
		func(i int) string { return fmt.Sprintf(`"%s%x"`, strings.Repeat("k", 100), 1<<30-i) }, ""},
}

// TestParamsOfMadeUpKeysCostNoMap: the params of a method the broker serves itself, a frame's worth of keys none of its
// reads asks for, are read and refused ("unknown field", the least of them) without a map of them: decoded to one,
// 22,830 keys cost 3.9 MB per request (15 times the frame), before a worker's query was even refused as forbidden,
// and a credential's MaxConnsPerCredential connections (64), a request in flight each within its burst, held a
// quarter of a gigabyte at once. Each key is now compared where it is, an escaped one decoded into one buffer.
func TestParamsOfMadeUpKeysCostNoMap(t *testing.T) {
	for _, tc := range madeUpKeySpellings {
		t.Run(tc.name, func(t *testing.T) {
			raw := madeUpKeys(wire.DefaultMaxFrame, tc.key)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			p := readParams(&call{method: "query.tasks", params: raw})
			limit, _ := pageParams(p)
			p.strict()
			runtime.ReadMemStats(&after)
			require.Equal(t, 1, limit)
			var e *wire.Error
			require.ErrorAs(t, p.err, &e)
			require.Equal(t, wire.CodeBadParams, e.Code)
			if tc.least != "" {
				require.Equal(t, fmt.Sprintf("query.tasks: invalid params: unknown field %q", tc.least), e.Message)
			}
			// NB: the bound is a few of the longest keys, the refusal and the reader, not a count of keys.
			require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(8<<10), "bytes allocated for %d bytes of params",
				len(raw))
		})
	}
}

// paramsInAMap is how the broker read params before: decoded whole into a map, every key as json.Unmarshal decodes
// it and the last of a key repeated kept; the refusal of a strict read names the least key none asked for. The
// answers of params are held to it.
type paramsInAMap struct {
	m   map[string]json.RawMessage
	err bool
}

func (p paramsInAMap) get(key string) (json.RawMessage, bool) {
	v, ok := p.m[key]
	if !ok || string(v) == "null" {
		return nil, false
	}
	return v, true
}

func (p paramsInAMap) unknown(read []string) string {
	var keys []string
	for k := range p.m {
		if !slices.Contains(read, k) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return ""
	}
	return slices.Min(keys)
}

// TestParamsAnswerAsTheMapDid: whatever the keys — repeated (the last kept, null or not), escaped (to a key read, or
// to another), a surrogate pair or a lone surrogate escaped, empty, multi-byte, beside nested values and spaces —,
// params gives each key read the value the map gave it, and refuses the key the map's refusal named.
func TestParamsAnswerAsTheMapDid(t *testing.T) {
	read := []string{"limit", "cursor", "é", ""}
	for _, obj := range []string{
		`{}`, `{ }`, `null`, ``, `{"limit":1}`, `{"limit":1,"limit":2}`, `{"limit":1,"limit":null}`,
		`{"limit":null,"limit":3}`, `{"\u006cimit":4}`, `{"limit":5,"\u006cimit":6}`, `{"\u00e9":"x","cursor":"c"}`,
		`{"é":{"a":[1,{"b":"}"}]},"z":1}`, `{"":7}`, `{"b":1,"a":2}`, `{"a\u0062":1,"ab ":2}`, `{"\ud83d\ude00":1,"😀":2}`,
		`{"\ud83d":1,"\ude00":2}`, `{"\ud83d":1,"\ufffd":2}`, `{"x\"y":1,"x\\y":2}`, "{\n\t\"limit\" :\r 8 ,\"q\": [ ] }",
		`{"limit":"9","cursor":7}`, `{"é":1,"e":2}`, `{"zz":1,"z":2,"limit":3}`,
	} {
		want := paramsInAMap{m: map[string]json.RawMessage{}}
		raw := strings.TrimSpace(obj)
		if raw != "" && raw != "null" {
			want.err = json.Unmarshal([]byte(raw), &want.m) != nil
		}
		got := readParams(&call{method: "m", params: []byte(obj)})
		require.Equal(t, want.err, got.err != nil, "%s", obj)
		for _, k := range read {
			v, ok := got.get(k)
			wv, wok := want.get(k)
			require.Equal(t, wok, ok, "%s: %q", obj, k)
			require.Equal(t, string(wv), string(v), "%s: %q", obj, k)
		}
		got.strict()
		if least := want.unknown(read); least != "" {
			require.EqualError(t, got.err, fmt.Sprintf("wire: bad-params: m: invalid params: unknown field %q", least),
				"%s", obj)
		} else {
			require.NoError(t, got.err, "%s", obj)
		}
	}
}
