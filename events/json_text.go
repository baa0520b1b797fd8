package events

import (
	"strings"
	"unicode/utf8"
)

// AsJSONReadsBack is s as encoding/json writes and reads it back: each byte that is not part of valid UTF-8 becomes
// U+FFFD (and nothing else changes). NB: not strings.ToValidUTF8, which replaces a run of such bytes with one.
func AsJSONReadsBack(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		b.WriteRune(r) // NB: ranging over a string yields utf8.RuneError for each byte that is not UTF-8
	}
	return b.String()
}
