package wire

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestValidateMaxFrame(t *testing.T) {
	for _, tc := range []struct {
		n  int
		ok bool
	}{
		{0, false}, {-1, false}, {1023, false}, {1024, true}, {DefaultMaxFrame, true}, {1048576, true}, {1048577, false},
	} {
		err := ValidateMaxFrame(tc.n)
		if tc.ok {
			require.NoError(t, err, tc.n)
		} else {
			require.EqualError(t, err, fmt.Sprintf("wire: max frame %d bytes is outside 1024..1048576", tc.n))
		}
	}
}

func TestUTF16Len(t *testing.T) {
	for s, want := range map[string]int{
		"":      0,
		"abc":   3,
		"é":     1, // two bytes, one unit
		"€":     1, // three bytes, one unit
		"😀":     2, // four bytes, a surrogate pair
		"a😀b":   4,
		"\xff":  1, // invalid UTF-8 decodes to U+FFFD
		"\xffa": 2,
	} {
		require.Equal(t, want, UTF16Len(s), "%q", s)
	}
}
