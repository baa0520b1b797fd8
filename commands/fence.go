package commands

import (
	"strings"
	"unicode/utf8"
)

// MaxResultChars bounds a delegate's result text in the fence (D§6.2).
const MaxResultChars = 65536

// Fence markers a result line may not start with, and what such a line
// starts with instead (pi-crew: replace(/^--- (end )?delegate /gm, "-- ~delegate ")).
var fenceMarkers = []string{"--- delegate ", "--- end delegate "}

const neutralisedMarker = "-- ~delegate "

// fence wraps a grandchild's result for delivery to its parent (D§6.2): the
// text cannot forge the end marker, because every line that starts like a
// marker is rewritten, and it is cut to MaxResultChars.
//
//	--- delegate <subId> (<tag>) ---
//	<text>
//	--- end delegate <subId> ---
func fence(subID, tag, text string) string {
	body := neutraliseMarkers(text)
	if utf8.RuneCountInString(body) > MaxResultChars {
		body = truncate(body, MaxResultChars)
	}
	return "--- delegate " + subID + " (" + tag + ") ---\n" + body + "\n--- end delegate " + subID + " ---"
}

// neutraliseMarkers rewrites every marker at the start of a line. A line
// starts where JavaScript's multiline ^ matches: at the start of the text
// and after \n, \r, U+2028 or U+2029, so a reader that splits lines on any
// of them sees no marker either. A text without a marker (nearly every
// result) is returned as it is, without a copy: every settlement fences its
// result on the single writer.
func neutraliseMarkers(text string) string {
	var b strings.Builder
	copied := 0 // text[:copied] is in b, rewritten
	lineStart := true
	for i := 0; i < len(text); {
		if lineStart {
			if m := markerAt(text[i:]); m != "" {
				if b.Cap() == 0 {
					b.Grow(len(text))
				}
				b.WriteString(text[copied:i])
				b.WriteString(neutralisedMarker)
				i += len(m)
				copied = i
				lineStart = false
				continue
			}
		}
		c := text[i]
		if c < utf8.RuneSelf {
			i++
			lineStart = c == '\n' || c == '\r'
			continue
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		i += size
		lineStart = r == '\u2028' || r == '\u2029'
	}
	if b.Cap() == 0 {
		return text
	}
	b.WriteString(text[copied:])
	return b.String()
}

func markerAt(s string) string {
	for _, m := range fenceMarkers {
		if strings.HasPrefix(s, m) {
			return m
		}
	}
	return ""
}
