package jsonstring

import "unicode/utf8"

// htmlSafe marks the ASCII bytes encoding/json writes in a string as they are: all but the control characters (DEL
// is not one of them), the quote, the backslash and HTML's <, > and &, which json.Marshal escapes.
var htmlSafe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// Append appends s as json.Marshal encodes a string, byte for byte (FuzzAppendJSONStringAgreesWithMarshal): the
// quote, the backslash and the control characters escaped (\b, \f, \n, \r and \t short), HTML's <, > and & as
// \u003c, \u003e and \u0026, U+2028 and U+2029 as \u2028 and \u2029, and each byte of invalid UTF-8 as \ufffd. It
// allocates only when dst has no room.
//
// Why: a message's body holds lines (a settlement's result is fenced on lines of its own), and json.Marshal of one
// string, its copy and its interface value included, was two allocations of every mailbox push besides the frame,
// and of every string not plain ASCII in a command's result and in a team.event push or an events.since page.
func Append(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if htmlSafe[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default: // another control character, or <, > and &
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
