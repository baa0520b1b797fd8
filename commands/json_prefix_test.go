package commands

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// TestJSONPrefixIsWhatFits: JSONPrefix's prefix takes at most n bytes in a JSON string as encoding/json writes it,
// and one char more would not fit (but for the control characters it counts as six bytes); jsonBytes is the bytes
// the whole string takes so.
func TestJSONPrefixIsWhatFits(t *testing.T) {
	for _, s := range []string{"plain text", `"quoted" \ back`, "<a> & <b>", "\u2028\u2029x", "é😀日本",
		"\x01\x1f\x7f", "\xff\xfe invalid", "\uFFFD real", "tab\tnl\ncr\r"} {
		require.Equal(t, s, JSONPrefix(s, jsonBytes(s)), "%q", s)
		require.NotEqual(t, s, JSONPrefix(s, jsonBytes(s)-1), "%q", s)
		if !strings.ContainsAny(s, "\x01\x1f") {
			b, err := json.Marshal(s)
			require.NoError(t, err)
			require.Equal(t, len(b)-2, jsonBytes(s), "%q", s)
		}
		for n := range 64 {
			p := JSONPrefix(s, n)
			require.True(t, strings.HasPrefix(s, p), "%q %d", s, n)
			b, err := json.Marshal(p)
			require.NoError(t, err)
			require.LessOrEqual(t, len(b)-2, n, "%q %d", s, n)
			if p == s || strings.ContainsAny(s, "\x01\x1f") {
				continue
			}
			_, size := utf8.DecodeRuneInString(s[len(p):])
			b, _ = json.Marshal(s[:len(p)+size])
			require.Greater(t, len(b)-2, n, "%q %d: one char more fits", s, n)
		}
	}
}
