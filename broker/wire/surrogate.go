package wire

import (
	"bytes"

	"github.com/crewlog/crewlog/events/jsonscan"
)

// HoldsLoneSurrogate reports whether raw, a JSON text, holds a string with a lone UTF-16 surrogate: a \uD800..\uDBFF
// escape not followed at once by a \uDC00..\uDFFF one, or one of the latter not preceded by one of the former.
//
// Why: JSON strings are UTF-16 to JavaScript, and JSON.stringify writes a lone surrogate as its escape (a string
// cut between the two halves of an emoji holds one). It is no Unicode character: encoding/json decodes it to
// U+FFFD, so text crewlog kept and answered would not be the text its client sent, and two strings that differ only
// there would be one — two command ids, two request ids. The frame's bytes are valid UTF-8 (the Reader checks them);
// this finds what its escapes spell that is not. Any bytes are safe to pass; on invalid JSON the answer means
// nothing.
func HoldsLoneSurrogate(raw []byte) bool {
	for i := 0; ; {
		j := bytes.IndexByte(raw[i:], '\\')
		if j < 0 {
			return false
		}
		i += j
		// NB: in JSON a backslash appears only in a string, where it starts an escape: skipping each escape whole
		// keeps an escaped backslash (\\) from being read as the start of the next one.
		if i+1 >= len(raw) {
			return false
		}
		if raw[i+1] != 'u' {
			i += 2
			continue
		}
		u, ok := jsonscan.EscapedUnit(raw, i)
		switch {
		case !ok:
			return false
		case 0xdc00 <= u && u <= 0xdfff:
			return true
		case 0xd800 <= u && u <= 0xdbff:
			if low, ok := jsonscan.EscapedUnit(raw, i+6); !ok || low < 0xdc00 || low > 0xdfff {
				return true
			}
			i += 12
		default:
			i += 6
		}
	}
}
