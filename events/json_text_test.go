package events

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// AsJSONReadsBack is what encoding/json reads back of what it wrote, byte for byte: each byte that is not UTF-8 is
// one U+FFFD, a U+FFFD written as such stays one, and valid text is returned as it is.
func TestAsJSONReadsBackIsWhatJSONReadsBack(t *testing.T) {
	for _, s := range []string{"", "plain", "é 𝄞", "a\xffb", "\xff\xfe\xfd", "\xe2\x82", "\xe2\x82\xac\xe2",
		"\uFFFD\xff",
		"\xed\xa0\x80", "x\x00y"} {
		b, err := json.Marshal(s)
		require.NoError(t, err)
		var back string
		require.NoError(t, json.Unmarshal(b, &back))
		require.Equal(t, back, AsJSONReadsBack(s), "%q", s)
	}
}
