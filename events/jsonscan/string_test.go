package jsonscan

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// stringCases are JSON strings whose decoding has a rule of its own: each escape, surrogate pairs and lone surrogates
// (high, low, a high one before another escape or at the end), multi-byte characters, and bytes of invalid UTF-8.
var stringCases = []string{
	`""`, `"a"`, `"\"\\\/\b\f\n\r\t"`, `"\u0061\u00e9\u20AC"`, `"é😀"`, `"\ud83d\ude00"`, `"\uD83D\uDE00x"`,
	`"\ud83d"`, `"\ude00"`, `"\ud83dx"`, `"\ud83d\u0061"`, `"\ud83d\ud83d\ude00"`, `"\ude00\ud83d"`, `"a\\u0061"`,
	"\"\xff\"", "\"a\xc3\"", "\"\xed\xa0\x80\"", `"\u0000"`, `"\uFFFD"`,
}

// TestAppendString: AppendString decodes a string as encoding/json does, appending to what dst holds, and ends at its
// closing quote whatever follows.
func TestAppendString(t *testing.T) {
	for _, s := range stringCases {
		var want string
		require.NoError(t, json.Unmarshal([]byte(s), &want), "%s", s)
		require.Equal(t, "x"+want, string(AppendString([]byte("x"), []byte(` `+s+`,"b"`), 1)), "%s", s)
	}
}

// TestAppendStringReusesItsBuffer: a buffer with room is appended to, not reallocated: the point of decoding into one.
func TestAppendStringReusesItsBuffer(t *testing.T) {
	buf := make([]byte, 0, 64)
	in := []byte(`"\u0061bc\ud83d\ude00"`)
	require.Zero(t, testing.AllocsPerRun(100, func() { buf = AppendString(buf[:0], in, 0) }))
	require.Equal(t, "abc😀", string(buf))
}

// FuzzAppendStringAgreesWithEncodingJSON: every valid JSON string decodes as json.Unmarshal decodes it, and any other
// input neither panics nor reads past its end.
func FuzzAppendStringAgreesWithEncodingJSON(f *testing.F) {
	for _, s := range stringCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := []byte(s)
		var want string
		if len(b) == 0 || b[0] != '"' || json.Unmarshal(b, &want) != nil {
			for i := range len(b) {
				if b[i] == '"' {
					AppendString(nil, b, i)
				}
			}
			return
		}
		require.Equal(t, want, string(AppendString(nil, b, 0)), "%q", s)
	})
}
