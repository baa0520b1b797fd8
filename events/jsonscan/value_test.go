package jsonscan

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSkipValue: SkipValue ends a value where encoding/json does, whatever the value holds that looks like an end
// (a comma, a bracket or a quote in a string, an escaped backslash), and SkipSpace skips JSON's four spaces only.
func TestSkipValue(t *testing.T) {
	for _, tc := range []struct{ in, value string }{
		{`"a",1`, `"a"`},
		{`"a\"b" ]`, `"a\"b"`},
		{`"a\\",1`, `"a\\"`},
		{`"],}"}`, `"],}"`},
		{`{"a":[1,"}"],"b":{}} ,`, `{"a":[1,"}"],"b":{}}`},
		{`[[],[[]]],`, `[[],[[]]]`},
		{`-1.5e+3}`, `-1.5e+3`},
		{"0\t", "0"},
		{"true\n", "true"},
		{"null\r", "null"},
		{`false]`, `false`},
		{`7`, `7`},
	} {
		require.Equal(t, len(tc.value), SkipValue([]byte(tc.in), 0), "%s", tc.in)
	}
	require.Equal(t, 0, SkipValue(nil, 0))
	require.Equal(t, 4, SkipSpace([]byte(" \t\n\r\f"), 0))
	require.Equal(t, 3, SkipSpace([]byte("a  "), 1))
	require.Equal(t, 0, SkipSpace([]byte("a "), 0))
	for c := range 256 {
		require.Equal(t, c == ' ' || c == '\t' || c == '\n' || c == '\r', IsSpace(byte(c)), "%q", c)
	}
}

// FuzzSkipValueAgreesWithEncodingJSON: in valid JSON, SkipValue ends the value where encoding/json does, and so
// walks an array's elements as json.Unmarshal splits them; on any other input it returns, within the input.
func FuzzSkipValueAgreesWithEncodingJSON(f *testing.F) {
	for _, s := range append(listCases, `{"a":"}","b":[1,{"c":"\\"}]}`, ` 7 `, `"x"`, `null`, `[1 , -2.5E3,true]`) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := []byte(s)
		if !json.Valid(b) {
			for i := range len(b) {
				require.LessOrEqual(t, SkipValue(b, i), len(b))
			}
			return
		}
		start := SkipSpace(b, 0)
		end := SkipValue(b, start)
		require.Equal(t, len(b), SkipSpace(b, end), "%s: the value ends at %d", s, end)
		var elems []json.RawMessage
		if b[start] != '[' || json.Unmarshal(b, &elems) != nil {
			return
		}
		var walked []json.RawMessage
		for i := SkipSpace(b, start+1); b[i] != ']'; {
			e := SkipValue(b, i)
			walked = append(walked, b[i:e])
			if i = SkipSpace(b, e); b[i] == ',' {
				i = SkipSpace(b, i+1)
			}
		}
		require.Equal(t, len(elems), len(walked), "%s", s)
		for k := range elems {
			require.Equal(t, string(elems[k]), string(walked[k]), "%s: element %d", s, k)
		}
	})
}
