package commands

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events/jsonstring/jsonref"
)

// TestJSONPrefixIsWhatFits: JSONPrefix's prefix takes at most n bytes in a JSON string as encoding/json writes it (Go
// 1.26's, as crewlog's encoders do: jsonref), and one char more would not fit (but for the control characters it
// counts as six bytes); jsonBytes is the bytes the whole string takes so.
func TestJSONPrefixIsWhatFits(t *testing.T) {
	for _, s := range []string{"plain text", `"quoted" \ back`, "<a> & <b>", "\u2028\u2029x", "é😀日本",
		"\x01\x1f\x7f", "\xff\xfe invalid", "\uFFFD real", "tab\tnl\ncr\r"} {
		require.Equal(t, s, JSONPrefix(s, jsonBytes(s)), "%q", s)
		require.NotEqual(t, s, JSONPrefix(s, jsonBytes(s)-1), "%q", s)
		if !strings.ContainsAny(s, "\x01\x1f") {
			require.Equal(t, len(jsonref.MarshalString(s))-2, jsonBytes(s), "%q", s)
		}
		for n := range 64 {
			p := JSONPrefix(s, n)
			require.True(t, strings.HasPrefix(s, p), "%q %d", s, n)
			require.LessOrEqual(t, len(jsonref.MarshalString(p))-2, n, "%q %d", s, n)
			if p == s || strings.ContainsAny(s, "\x01\x1f") {
				continue
			}
			_, size := utf8.DecodeRuneInString(s[len(p):])
			require.Greater(t, len(jsonref.MarshalString(s[:len(p)+size]))-2, n, "%q %d: one char more fits", s, n)
		}
	}
}
