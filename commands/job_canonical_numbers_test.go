package commands

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCanonicalIntegerDigits: an integer literal of up to 15 chars is copied through (every such integer is exact in a
// float64, so JavaScript prints the same digits), and a longer one is printed as JavaScript prints its float64: at 16
// digits, past 2^53, the digits JavaScript prints are not the literal's.
func TestCanonicalIntegerDigits(t *testing.T) {
	for raw, want := range map[string]string{
		"999999999999999":   "999999999999999",
		"-99999999999999":   "-99999999999999",
		"9999999999999999":  "10000000000000000",
		"-999999999999999":  "-999999999999999",
		"9007199254740993":  "9007199254740992",
		"-9999999999999999": "-10000000000000000",
	} {
		var b bytes.Buffer
		require.NoError(t, canonicalJSON(&b, []byte(raw), 0), raw)
		require.Equal(t, want, b.String(), raw)
	}
}
