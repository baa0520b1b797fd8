package broker

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
)

// A string param of a method the broker serves itself is bounded in chars, Unicode code points, like a command's
// (docs/protocol.md, "Lengths"): at its bound it is read whatever the char's size in bytes or UTF-16 units, and one
// char more is refused naming the key and the bound.
func TestParamsCountChars(t *testing.T) {
	const max = 8
	read := func(t *testing.T, key, value string) *params {
		b, err := json.Marshal(map[string]any{key: value})
		require.NoError(t, err)
		return readParams(&call{method: "m", params: b})
	}
	for _, char := range []string{"a", "é", "😀"} {
		t.Run(char, func(t *testing.T) {
			p := read(t, "k", strings.Repeat(char, max))
			require.Equal(t, strings.Repeat(char, max), p.str("k", true, max))
			require.NoError(t, p.err)

			p = read(t, "k", strings.Repeat(char, max+1))
			p.str("k", true, max)
			var e *wire.Error
			require.ErrorAs(t, p.err, &e)
			require.Equal(t, wire.CodeBadParams, e.Code)
			require.Equal(t, fmt.Sprintf("m: invalid params: k must be a string of at most %d chars", max), e.Message)

			list := func(s string) *params {
				b, err := json.Marshal(map[string]any{"k": []string{s}})
				require.NoError(t, err)
				return readParams(&call{method: "m", params: b})
			}
			p = list(strings.Repeat(char, max))
			require.Equal(t, []string{strings.Repeat(char, max)}, p.strs("k", 1, max))
			require.NoError(t, p.err)
			p = list(strings.Repeat(char, max+1))
			require.Nil(t, p.strs("k", 1, max))
			require.ErrorAs(t, p.err, &e)
		})
	}
}

// A refused array of strings is answered with both of its bounds, the count and each string's length, so that a
// client refused for a string too long (an events.subscribe type past MaxTypeLen) learns the bound it passed.
func TestStrsRefusalNamesEveryBound(t *testing.T) {
	const n, max = 2, 8
	want := fmt.Sprintf("m: invalid params: k must be an array of at most %d strings of 1..%d chars", n, max)
	for _, tc := range []struct {
		name  string
		value any
	}{
		{"too many", []string{"a", "b", "c"}},
		{"one empty", []string{"a", ""}},
		{"one too long", []string{"a", strings.Repeat("é", max+1)}},
		{"no array", "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(map[string]any{"k": tc.value})
			require.NoError(t, err)
			p := readParams(&call{method: "m", params: b})
			require.Nil(t, p.strs("k", n, max))
			var e *wire.Error
			require.ErrorAs(t, p.err, &e)
			require.Equal(t, wire.CodeBadParams, e.Code)
			require.Equal(t, want, e.Message)
		})
	}
}
