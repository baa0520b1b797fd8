package wire

import (
	"encoding/json"
	"strconv"
	"testing"
	"unicode/utf16"

	"github.com/stretchr/testify/require"
)

func TestHoldsLoneSurrogate(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		lone      bool
	}{
		{"no string", `{"a":[1,true,null]}`, false},
		{"no escape", `"plain é 😀"`, false},
		{"other escapes", `"\n\t\"\\\/\u0041\u00e9\uffff"`, false},
		{"a pair", `"\ud83d\ude00"`, false},
		{"a pair in upper case", `"\uD83D\uDE00"`, false},
		{"pairs side by side", `"\udbff\udfff\ud800\udc00"`, false},
		{"an escaped backslash before u", `"\\ud800"`, false},
		{"escaped backslashes before a pair", `"\\\\\ud83d\ude00"`, false},
		{"a lone high", `"a\ud800b"`, true},
		{"a high at the end", `"a\ud800"`, true},
		{"a lone low", `"\udc00"`, true},
		{"a reversed pair", `"\ude00\ud83d"`, true},
		{"two highs and a low", `"\ud800\ud800\udc00"`, true},
		{"a high before an escaped letter", `"\ud800\u0041"`, true},
		{"a high before another escape", `"\ud800\n"`, true},
		{"a high ending one string, a low starting the next", `["\ud800","\udc00"]`, true},
		{"a lone one in a key", `{"\udfff":1}`, true},
		{"deep in params", `{"a":{"b":["x","y\udbffz"]}}`, true},
		{"an escaped backslash before a lone one", `"\\\ud800"`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.True(t, json.Valid([]byte(tc.raw)))
			require.Equal(t, tc.lone, HoldsLoneSurrogate([]byte(tc.raw)))
			require.Equal(t, tc.lone, loneSurrogateReference(tc.raw))
		})
	}
}

// loneSurrogateReference decodes every string of raw, valid JSON, keeping its \u escapes as UTF-16 units, and
// reports whether one is unpaired.
func loneSurrogateReference(raw string) bool {
	for i := 0; i < len(raw); i++ {
		if raw[i] != '"' {
			continue
		}
		var units []uint16
		for i++; raw[i] != '"'; i++ {
			if raw[i] != '\\' {
				units = append(units, 0) // a byte of a character, never a surrogate
				continue
			}
			i++
			if raw[i] != 'u' {
				units = append(units, 0) // any other escape, a unit of its own
				continue
			}
			u, _ := strconv.ParseUint(raw[i+1:i+5], 16, 16) // valid JSON: four hex digits
			units = append(units, uint16(u))
			i += 4
		}
		for j := 0; j < len(units); j++ {
			switch {
			case utf16.IsSurrogate(rune(units[j])) && units[j] < 0xdc00 && j+1 < len(units) &&
				0xdc00 <= units[j+1] && units[j+1] <= 0xdfff:
				j++
			case utf16.IsSurrogate(rune(units[j])):
				return true
			}
		}
	}
	return false
}

// FuzzHoldsLoneSurrogate: never a panic, whatever the bytes, and on valid JSON the answer of a decoding of every
// string into UTF-16 units.
func FuzzHoldsLoneSurrogate(f *testing.F) {
	for _, seed := range []string{`"\ud83d\ude00"`, `"\ud800"`, `"\\ud800"`, `{"\udc00":["\ud800\u0041"]}`, `\`,
		`"\u`, `"\ud800\`, `"\ud800\u12`,
		`"\ud8000\udC00"`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got := HoldsLoneSurrogate(raw)
		if json.Valid(raw) {
			require.Equal(t, loneSurrogateReference(string(raw)), got, "%q", raw)
		}
	})
}
