package jsonstring

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events/jsonstring/jsonref"
)

// FuzzAppendJSONStringAgreesWithMarshal: a string is appended as json.Marshal encodes it (Go 1.26's: jsonref), byte
// for byte, after bytes already there, whatever it holds: escapes short and long, HTML's characters, line
// separators, DEL, non-ASCII and invalid UTF-8, a multi-byte character cut at the end.
func FuzzAppendJSONStringAgreesWithMarshal(f *testing.F) {
	for _, seed := range []string{
		"", "plain", "--- delegate s1 (ok) ---\ndone\n--- end delegate s1 ---", `q"uote\back`, "<a&b>",
		"\b\f\n\r\t\x00\x1f", "\x7f", "héllo ✓", "\u2028x\u2029", "bad\xffutf8", "\xe2\x80", "\xed\xa0\x80",
		strings.Repeat("é<", 40),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := jsonref.MarshalString(s)
		require.Equal(t, "x"+string(want), string(Append([]byte("x"), s)), "%q", s)
	})
}

// TestAppendAllocatesNothing: with room in dst, a string of every kind of escape is appended in place.
func TestAppendAllocatesNothing(t *testing.T) {
	s := "--- delegate s1 (ok) ---\n<done> & \"quoted\"\t\x01\u2028é\xff\n--- end delegate s1 ---"
	dst := make([]byte, 0, 256)
	require.Zero(t, testing.AllocsPerRun(100, func() { dst = Append(dst[:0], s) }))
}
