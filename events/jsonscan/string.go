package jsonscan

import (
	"unicode/utf16"
	"unicode/utf8"
)

// AppendString appends to dst the text of the string that starts at b[i] (its opening quote), in valid JSON, decoded
// as encoding/json decodes it: its escapes resolved, a surrogate pair of escapes made one character, and a lone
// surrogate escape or a byte of invalid UTF-8 made U+FFFD.
//
// Why: a client's object may hold tens of thousands of keys, and a key decoded to a string of its own cost an
// allocation each (and json.Unmarshal's own state each, a hundred bytes and more): a frame's worth of escaped keys,
// megabytes. A caller that only compares keys decodes each into one buffer it reuses, which grows to the longest.
func AppendString(dst, b []byte, i int) []byte {
	end := SkipString(b, i) - 1 // the closing quote
	for i++; i < end; {
		c := b[i]
		switch {
		case c == '\\' && i+1 < end:
			dst, i = appendEscape(dst, b, i)
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
		default:
			r, size := utf8.DecodeRune(b[i:end])
			if r == utf8.RuneError && size == 1 {
				dst = utf8.AppendRune(dst, utf8.RuneError)
			} else {
				dst = append(dst, b[i:i+size]...)
			}
			i += size
		}
	}
	return dst
}

// appendEscape appends what the escape at b[i] stands for, and returns the index after it (after both escapes of a
// surrogate pair).
func appendEscape(dst, b []byte, i int) ([]byte, int) {
	switch c := b[i+1]; c {
	case 'b':
		return append(dst, '\b'), i + 2
	case 'f':
		return append(dst, '\f'), i + 2
	case 'n':
		return append(dst, '\n'), i + 2
	case 'r':
		return append(dst, '\r'), i + 2
	case 't':
		return append(dst, '\t'), i + 2
	case 'u':
		u, ok := EscapedUnit(b, i)
		if !ok {
			return dst, len(b) // NB: no valid JSON gets here
		}
		r := rune(u)
		i += 6
		if utf16.IsSurrogate(r) {
			// As encoding/json: a pair is one character, and a surrogate that is not the first of one is U+FFFD
			// (the escape after it, if any, is read on its own).
			if low, ok := EscapedUnit(b, i); ok {
				if pair := utf16.DecodeRune(r, rune(low)); pair != utf8.RuneError {
					return utf8.AppendRune(dst, pair), i + 6
				}
			}
			r = utf8.RuneError
		}
		return utf8.AppendRune(dst, r), i
	default: // a quote, a backslash or a slash: itself
		return append(dst, c), i + 2
	}
}

// EscapedUnit returns the UTF-16 unit of the \uXXXX escape at b[i], and false when there is none.
func EscapedUnit(b []byte, i int) (uint16, bool) {
	if len(b)-i < 6 || b[i] != '\\' || b[i+1] != 'u' {
		return 0, false
	}
	var u uint16
	for _, c := range b[i+2 : i+6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		u = u<<4 | uint16(c)
	}
	return u, true
}
