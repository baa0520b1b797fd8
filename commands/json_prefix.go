package commands

import (
	"strings"
	"unicode/utf8"
)

// JSONPrefix is the longest prefix of s, whole chars, that takes at most n bytes inside a JSON string as
// encoding/json writes it (HTML's characters escaped): what the broker cuts a settle's text to (DelegateSettle.
// SentText). NB: it counts a control character other than \n, \r and \t as six bytes, what \u00XX takes, where
// encoding/json may write two.
func JSONPrefix(s string, n int) string {
	used := 0
	for at, r := range s {
		size := jsonRuneBytes(s, at, r)
		if used+size > n {
			return s[:at]
		}
		used += size
	}
	return s
}

// jsonBytes is the bytes s takes inside a JSON string, as JSONPrefix counts them.
func jsonBytes(s string) int {
	n := 0
	for at, r := range s {
		n += jsonRuneBytes(s, at, r)
	}
	return n
}

// jsonRuneBytes is the bytes r, at s[at:], takes inside a JSON string.
func jsonRuneBytes(s string, at int, r rune) int {
	switch {
	case r == utf8.RuneError && !strings.HasPrefix(s[at:], "\uFFFD"):
		return 6 // an invalid byte, written \ufffd
	case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t':
		return 2
	case r < 0x20 || r == '<' || r == '>' || r == '&' || r == '\u2028' || r == '\u2029':
		return 6
	}
	return utf8.RuneLen(r)
}
