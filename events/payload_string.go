package events

// PayloadString reads the string of key at the top of payload b, of type t written at schema version version, as
// DecodePayload reads it into the field of that key (nil is ""), without decoding the rest of the payload: for a
// reader that needs one id of an event, where the decode made the payload's struct and copied its strings. key must
// be the msgpack key of a string field of t's payload.
//
// ok is false for a payload it does not read so, which the caller decodes instead: a type it does not know, another
// schema version than t's current (an older one is upcast first), anything but a map (a struct as an array, nil),
// key absent or given twice, its value not a string, a length past the end of b, bytes after the payload. NB: the
// other values are passed over, not decoded: a payload the decode refuses for another of its fields may still give
// key's string.
//
// NB: the string aliases b: it is valid only while b is, and is never to be kept (copy it, or Decoder.Intern it).
func PayloadString(t string, version uint16, b []byte, key string) (s string, ok bool) {
	if k, known := registry[t]; !known || version != k.version {
		return "", false
	}
	r := fastReader{b: b}
	found := false
	for n := r.mapLen(); n > 0 && r.ok(); n-- {
		if r.key() != key {
			r.skip()
			continue
		}
		if found {
			return "", false
		}
		found = true
		s = r.key() // NB: key reads a string without copying it
	}
	if !found || !r.ok() || r.i != len(b) {
		return "", false
	}
	return s, true
}
