package msgpacklen

import "encoding/binary"

// Status is the outcome of Skip.
type Status uint8

const (
	// OK: the values were passed over.
	OK Status = iota
	// Short: a declared length or count runs past the end of the bytes, so
	// no decoder can succeed.
	Short
	// Unknown: the code 0xc1, which msgpack never uses; decoders refuse it.
	Unknown
)

// Fit reports whether every length declared in the first value of b fits in
// b. A value Skip cannot classify (Unknown) fits: refusing it is the
// decoder's business, and it allocates nothing for it.
func Fit(b []byte) bool {
	_, st := Skip(b, 0, 1)
	return st != Short
}

// Skip passes over n values of b starting at i and returns the index after
// them. It keeps a count of the values still to pass instead of recursing,
// so nesting costs no stack, and it refuses a count that the remaining
// bytes cannot hold (each value takes at least one), so a forged length is
// caught before anything could be sized by it. On a Status other than OK
// the index returned is where it stopped.
func Skip(b []byte, i, n int) (int, Status) {
	s := skipper{b: b, i: i}
	for n > 0 && s.st == OK {
		if n > len(s.b)-s.i {
			return s.i, Short
		}
		n--
		c := s.b[s.i]
		s.i++
		switch {
		case c <= 0x7f || c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3:
			continue
		case c >= 0x80 && c <= 0x8f:
			n += int(c&0x0f) * 2
			continue
		case c >= 0x90 && c <= 0x9f:
			n += int(c & 0x0f)
			continue
		case c >= 0xa0 && c <= 0xbf:
			s.take(int(c & 0x1f))
			continue
		}
		switch c {
		case 0xcc, 0xd0:
			s.take(1)
		case 0xcd, 0xd1:
			s.take(2)
		case 0xce, 0xd2, 0xca:
			s.take(4)
		case 0xcf, 0xd3, 0xcb:
			s.take(8)
		case 0xd9, 0xc4:
			s.take(s.length(1))
		case 0xda, 0xc5:
			s.take(s.length(2))
		case 0xdb, 0xc6:
			s.take(s.length(4))
		case 0xdc:
			n += s.length(2)
		case 0xdd:
			n += s.length(4)
		case 0xde:
			n += s.length(2) * 2
		case 0xdf:
			n += s.length(4) * 2
		case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1, 2, 4, 8, 16: type byte + data
			s.take(1 + 1<<(c-0xd4))
		case 0xc7:
			s.take(1 + s.length(1))
		case 0xc8:
			s.take(1 + s.length(2))
		case 0xc9:
			s.take(1 + s.length(4))
		default:
			s.st = Unknown // 0xc1
		}
	}
	return s.i, s.st
}

// skipper is Skip's cursor: after the first problem every read is a no-op.
type skipper struct {
	b  []byte
	i  int
	st Status
}

// take passes over the next n bytes, or records Short when fewer remain.
func (s *skipper) take(n int) {
	if s.st != OK {
		return
	}
	if n < 0 || n > len(s.b)-s.i {
		s.st = Short
		return
	}
	s.i += n
}

// length reads a big-endian length of 1, 2 or 4 bytes.
func (s *skipper) length(size int) int {
	if s.st != OK {
		return 0
	}
	if size > len(s.b)-s.i {
		s.st = Short
		return 0
	}
	p := s.b[s.i : s.i+size]
	s.i += size
	switch size {
	case 1:
		return int(p[0])
	case 2:
		return int(binary.BigEndian.Uint16(p))
	}
	return int(binary.BigEndian.Uint32(p))
}
