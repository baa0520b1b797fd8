package commands

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// MaxResultChars bounds a delegate's result text in the fence (D§6.2).
const MaxResultChars = 65536

// Fence markers a result line may not start with, and what such a line
// starts with instead (pi-crew: replace(/^--- (end )?delegate /gm, "-- ~delegate ")).
var fenceMarkers = []string{"--- delegate ", "--- end delegate "}

const neutralisedMarker = "-- ~delegate "

// fence wraps a grandchild's result for delivery to its parent (D§6.2): the
// text cannot forge the end marker, because every line that starts with a
// marker, or with what reads as one, is rewritten, and it is cut to
// MaxResultChars after the rewrite, so a marker the cut would split was
// rewritten whole.
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
// starts at the start of the text and after any of Unicode's line breaks
// (\n, \v, \f, \r, NEL, U+2028, U+2029) and the separators \x1c..\x1e
// that Python's str.splitlines splits on: where JavaScript's multiline ^
// matches (pi-crew's rewrite), and wherever else a reader may split lines,
// so that none sees a marker. A text without a marker (nearly every result)
// is returned as it is, without a copy: every settlement fences its result
// on the single writer.
func neutraliseMarkers(text string) string {
	var b strings.Builder
	copied := 0 // text[:copied] is in b, rewritten
	lineStart := true
	for i := 0; i < len(text); {
		if lineStart {
			if n := markerLen(text[i:]); n > 0 {
				if b.Cap() == 0 {
					b.Grow(len(text))
				}
				b.WriteString(text[copied:i])
				b.WriteString(neutralisedMarker)
				i += n
				copied = i
				lineStart = false
				continue
			}
		}
		c := text[i]
		if c < utf8.RuneSelf {
			i++
			lineStart = '\n' <= c && c <= '\r' || '\x1c' <= c && c <= '\x1e'
			continue
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		i += size
		lineStart = r == '\u0085' || r == '\u2028' || r == '\u2029'
	}
	if b.Cap() == 0 {
		return text
	}
	b.WriteString(text[copied:])
	return b.String()
}

// markerLen is the length in bytes of the marker s starts with, 0 when it
// starts with none: a marker as pi-crew writes it, or anything a reader
// reads as one (lookAlikeLen).
func markerLen(s string) int {
	for _, m := range fenceMarkers {
		if strings.HasPrefix(s, m) {
			return len(m)
		}
	}
	if s == "" || s[0] < utf8.RuneSelf && s[0] != '-' {
		return 0 // NB: the common line start; a look-alike starts with a dash or a character beyond ASCII
	}
	for _, m := range fenceMarkers {
		if n := lookAlikeLen(s, m); n > 0 {
			return n
		}
	}
	return 0
}

// lookAlikeLen is the length in bytes of the start of s that reads as
// marker m, or 0: the characters of m once the invisible ones are left out
// (invisible: zero-width joiners and spaces, the byte order mark, the soft
// hyphen, variation selectors) and every other
// character is read as its ASCII look-alike: any hyphen or dash as '-', any
// space as ' ', and a compatibility form (fullwidth, mathematical, circled
// letters) as what it decomposes to (NFKD). A worker's text that spells the
// end marker so would read as crewlog's framing to the parent, a model
// reading characters as they look.
func lookAlikeLen(s, m string) int {
	j := 0 // m[:j] is matched
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		var read []byte
		switch {
		case r < utf8.RuneSelf:
			read = asciiBytes[r : r+1]
		case invisible(r):
		case unicode.Is(unicode.Dash, r):
			read = asciiBytes['-' : '-'+1]
		case unicode.Is(unicode.White_Space, r) && r != '\u0085' && r != '\u2028' && r != '\u2029':
			read = asciiBytes[' ' : ' '+1]
		default:
			if read = norm.NFKD.PropertiesString(s[i:]).Decomposition(); read == nil {
				return 0 // beyond ASCII, and no compatibility form of anything
			}
		}
		i += size
		n := min(len(read), len(m)-j)
		if string(read[:n]) != m[j:j+n] {
			return 0
		}
		if j += n; j == len(m) {
			return i
		}
	}
	return 0
}

// asciiBytes holds every ASCII byte at its own index, for lookAlikeLen's reading of a rune without an allocation.
var asciiBytes = func() []byte {
	b := make([]byte, utf8.RuneSelf)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}()

// invisible reports whether r is a code point a reader does not see: a
// format character (Cf, bidi controls included), a variation selector, or
// another of Unicode's default-ignorable code points (a Hangul filler, the
// combining grapheme joiner). A few format characters are visible (the
// Arabic number signs): a marker after one still reads as a marker.
func invisible(r rune) bool {
	return unicode.In(r, unicode.Cf, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point)
}
