// Package jsonref is the reference crewlog's JSON encoders are tested against: encoding/json as it wrote JSON
// through Go 1.26, on every Go release.
//
// crewlog's wire encoders (events/jsonstring, broker/wire, the commands' results) write what Go 1.26's
// encoding/json wrote, byte for byte, whatever Go builds them. From Go 1.27 encoding/json runs on json/v2, which
// spells two things differently (the JSON text means the same):
//
//   - a byte that does not begin valid UTF-8 in a string: Go 1.26 wrote the escape \ufffd, Go 1.27 the character
//     U+FFFD itself;
//   - U+2028 and U+2029 inside a raw value (a json.RawMessage) written by an Encoder that does not escape HTML
//     (SetEscapeHTML(false), as broker/wire's generic frames are): Go 1.26 copied them as they are, Go 1.27
//     escapes them (\u2028, \u2029), as both do in a string.
//
// A test that held an encoder to json.Marshal byte for byte holds it to MarshalString where its values are strings
// (the same bytes on every release), and compares through Comparable where they are structs: exact where
// encoding/json is Go 1.26's, and up to those two spellings where it is json/v2's. The spellings themselves are held
// by tests that name the bytes.
package jsonref

import (
	"encoding/json"
	"unicode/utf8"
)

// V2 reports whether this build's encoding/json is the one json/v2 backs (Go 1.27 on): it writes an invalid byte
// as U+FFFD, not as the escape \ufffd.
var V2 = func() bool {
	b, err := json.Marshal("\xff")
	return err == nil && string(b) != `"\ufffd"`
}()

// MarshalString is s as Go 1.26's json.Marshal writes it: each byte that does not begin a valid UTF-8 sequence is
// the escape \ufffd, every valid run is written by this build's json.Marshal (whose escapes of valid text did not
// change).
func MarshalString(s string) []byte {
	if !V2 {
		b, _ := json.Marshal(s)
		return b
	}
	out := []byte{'"'}
	for {
		i := 0
		for i < len(s) {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				break
			}
			i += n
		}
		if i > 0 {
			b, _ := json.Marshal(s[:i])
			out = append(out, b[1:len(b)-1]...)
		}
		if i == len(s) {
			return append(out, '"')
		}
		out = append(out, `\ufffd`...)
		s = s[i+1:]
	}
}

// Comparable is JSON text b as it compares with encoding/json's output on this build: b itself where encoding/json
// is Go 1.26's; where it is json/v2's, b with every escape \ufffd, \u2028 and \u2029 written as its character (the
// spellings the two disagree on), so that the same text from either compares equal.
func Comparable(b []byte) []byte {
	if !V2 {
		return b
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			out = append(out, b[i])
			continue
		}
		if b[i+1] != 'u' || i+6 > len(b) {
			out = append(out, b[i], b[i+1]) // a two-byte escape: its second byte is never the start of another
			i++
			continue
		}
		switch hex := string(b[i+2 : i+6]); hex {
		case "fffd", "FFFD":
			out = utf8.AppendRune(out, utf8.RuneError)
		case "2028":
			out = utf8.AppendRune(out, '\u2028')
		case "2029":
			out = utf8.AppendRune(out, '\u2029')
		default:
			out = append(out, b[i:i+6]...)
		}
		i += 5
	}
	return out
}
