package wire

import "github.com/crewlog/crewlog/events/jsonscan"

// maxNesting is the deepest nesting of arrays and objects validJSON accepts: encoding/json's own limit, so that a
// frame json.Valid refuses for its depth is refused here too.
const maxNesting = 10000

// stringPlain marks the bytes a JSON string holds as they are: anything but the quote, the backslash and the
// control characters. Bytes of 0x80 and above are taken as they are, as json.Valid takes them (the frame's UTF-8 is
// checked apart).
var stringPlain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// validJSON reports whether b is exactly one JSON value, with optional whitespace around it: what json.Valid
// reports, nesting limit included (FuzzValidJSONAgreesWithEncodingJSON holds it to json.Valid on every input).
//
// Why: every frame is validated on the way in, the broker's requests and the client's answers and pushes alike, and
// json.Valid's scanner, one indirect call per byte, was most of the cost of reading a frame (1.7 µs for a 270-byte
// request). This is one pass, a branch per token and a table look-up per byte of a string, without allocation; the
// open containers are a bit each on the stack.
func validJSON(b []byte) bool {
	var objects [maxNesting/64 + 1]uint64 // bit d: the container open at depth d is an object
	depth := 0
	i := jsonscan.SkipSpace(b, 0)
	for {
		// A value starts at b[i].
		if i >= len(b) {
			return false
		}
		switch c := b[i]; c {
		case '{', '[':
			if depth == maxNesting {
				return false
			}
			i = jsonscan.SkipSpace(b, i+1)
			if c == '{' {
				objects[depth/64] |= 1 << (depth % 64)
			} else {
				objects[depth/64] &^= 1 << (depth % 64)
			}
			depth++
			if i < len(b) && (c == '{' && b[i] == '}' || c == '[' && b[i] == ']') {
				depth--
				i++
				break // an empty container is a whole value
			}
			if c == '{' {
				var ok bool
				if i, ok = memberKey(b, i); !ok {
					return false
				}
			}
			continue // its first value
		case '"':
			var ok bool
			if i, ok = skipJSONString(b, i); !ok {
				return false
			}
		case 't':
			if !hasLiteral(b, i, "true") {
				return false
			}
			i += len("true")
		case 'f':
			if !hasLiteral(b, i, "false") {
				return false
			}
			i += len("false")
		case 'n':
			if !hasLiteral(b, i, "null") {
				return false
			}
			i += len("null")
		default:
			var ok bool
			if i, ok = skipJSONNumber(b, i); !ok {
				return false
			}
		}
		// A value ended at b[i]: close the containers it ends, and find where the next value starts.
		for {
			i = jsonscan.SkipSpace(b, i)
			if depth == 0 {
				return i == len(b)
			}
			if i >= len(b) {
				return false
			}
			object := objects[(depth-1)/64]&(1<<((depth-1)%64)) != 0
			switch {
			case b[i] == ',':
				i = jsonscan.SkipSpace(b, i+1)
				if object {
					var ok bool
					if i, ok = memberKey(b, i); !ok {
						return false
					}
				}
			case object && b[i] == '}', !object && b[i] == ']':
				depth--
				i++
				continue
			default:
				return false
			}
			break
		}
	}
}

// memberKey reads a member's key and its colon at b[i] and returns where its value starts.
func memberKey(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return i, false
	}
	i, ok := skipJSONString(b, i)
	if !ok {
		return i, false
	}
	i = jsonscan.SkipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return i, false
	}
	return jsonscan.SkipSpace(b, i+1), true
}

func hasLiteral(b []byte, i int, lit string) bool {
	return len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit
}

// skipJSONString returns the index after the string that starts at b[i] (a quote), and whether it is one.
func skipJSONString(b []byte, i int) (int, bool) {
	i++
	for i < len(b) {
		c := b[i]
		if stringPlain[c] {
			i++
			continue
		}
		switch {
		case c == '"':
			return i + 1, true
		case c != '\\' || i+1 >= len(b):
			return i, false // a control character, or a backslash that ends the input
		}
		switch b[i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i += 2
		case 'u':
			if len(b)-i < 6 || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
				return i, false
			}
			i += 6
		default:
			return i, false
		}
	}
	return i, false
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// skipJSONNumber returns the index after the number that starts at b[i], and whether it is one:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func skipJSONNumber(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b) || !isDigit(b[i]):
		return i, false
	case b[i] == '0':
		i++
	default:
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return i, false
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return i, false
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	return i, true
}

// appendCompact appends raw with the whitespace between its tokens removed, as json.Compact writes it, and reports
// false, appending nothing, when raw is not valid JSON, as json.Compact fails
// (FuzzAppendCompactAgreesWithEncodingJSON holds the two together). Why: every frame AppendFrame writes compacts a
// raw value, a request's params, a result or a push's data, that is almost always compact already, and
// json.Compact's scanner cost as much as validating it.
func appendCompact(dst, raw []byte) ([]byte, bool) {
	if !validJSON(raw) {
		return dst, false
	}
	start := 0
	for i := 0; i < len(raw); {
		switch c := raw[i]; {
		case c == '"':
			i, _ = skipJSONString(raw, i) // valid: the string ends
		case jsonscan.IsSpace(c):
			dst = append(dst, raw[start:i]...)
			i = jsonscan.SkipSpace(raw, i)
			start = i
		default:
			i++
		}
	}
	return append(dst, raw[start:]...), true
}
