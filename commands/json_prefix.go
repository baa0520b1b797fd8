package commands

import (
	"unicode/utf8"

	"github.com/crewlog/crewlog/events"
)

// JSONPrefix is the longest prefix of s, whole chars, that takes at most n bytes inside a JSON string as
// encoding/json writes it (HTML's characters escaped): what the broker cuts a settle's text to (DelegateSettle.
// SentText). NB: it counts a control character other than \n, \r and \t as six bytes, what \u00XX takes, where
// encoding/json may write two.
func JSONPrefix(s string, n int) string {
	used := 0
	for at := 0; at < len(s); {
		r, size := utf8.DecodeRuneInString(s[at:])
		if used += events.JSONRuneBytes(r, size); used > n {
			return s[:at]
		}
		at += size
	}
	return s
}

// jsonBytes is the bytes s takes inside a JSON string, as JSONPrefix counts them.
func jsonBytes(s string) int {
	n := 0
	for at := 0; at < len(s); {
		r, size := utf8.DecodeRuneInString(s[at:])
		n += events.JSONRuneBytes(r, size)
		at += size
	}
	return n
}
