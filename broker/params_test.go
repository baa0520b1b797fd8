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
