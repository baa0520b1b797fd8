package events

import (
	"encoding/binary"
	"math"
	"unsafe"

	"github.com/crewlog/crewlog/events/msgpacklen"
)

// fastStatus is the outcome of a hand-written decode.
type fastStatus uint8

const (
	// fastOK: the payload decoded, into exactly what reflection decodes.
	fastOK fastStatus = iota
	// fastFallback: an encoding the fast path does not take on (a struct
	// as an array, a duplicate key, a type reflection would refuse);
	// reflection decides.
	fastFallback
	// fastBad: a declared length runs past the end of the payload, so no
	// decoder can succeed. Answering at once also keeps a forged length
	// from reaching msgpack, which would allocate for it.
	fastBad
)

// fastReader reads msgpack from a payload held in memory. On the first
// problem it records a status other than fastOK and every later read
// returns a zero value, so decoders check the status only once, at the end
// (loops check ok() to stop early).
//
// NB: every value read must decode to exactly what msgpack v5.4.1's
// reflection decodes into the same Go type (see decode_number.go,
// decode_string.go and decode_slice.go there): what reflection accepts and
// the fast path does not is a fallback, never an error.
type fastReader struct {
	b      []byte
	i      int
	st     fastStatus
	shared *Decoder // shares repeated strings when set
}

func (r *fastReader) ok() bool { return r.st == fastOK }

func (r *fastReader) fail(st fastStatus) {
	if r.st == fastOK {
		r.st = st
	}
}

// take returns the next n bytes, or nil (and fastBad) when fewer remain.
func (r *fastReader) take(n int) []byte {
	if r.st != fastOK {
		return nil
	}
	if n < 0 || n > len(r.b)-r.i {
		r.st = fastBad
		return nil
	}
	p := r.b[r.i : r.i+n : r.i+n]
	r.i += n
	return p
}

func (r *fastReader) code() byte {
	if r.st != fastOK {
		return 0
	}
	if r.i >= len(r.b) {
		r.st = fastBad
		return 0
	}
	c := r.b[r.i]
	r.i++
	return c
}

// peekNil consumes a nil code if one is next.
func (r *fastReader) peekNil() bool {
	if r.st == fastOK && r.i < len(r.b) && r.b[r.i] == 0xc0 {
		r.i++
		return true
	}
	return false
}

// length reads a big-endian length of 1, 2 or 4 bytes.
func (r *fastReader) length(size int) int {
	p := r.take(size)
	switch {
	case p == nil:
		return 0
	case size == 1:
		return int(p[0])
	case size == 2:
		return int(binary.BigEndian.Uint16(p))
	}
	return int(binary.BigEndian.Uint32(p))
}

// mapLen reads the header of a struct encoded as a map; -1 is nil. A map
// that cannot hold n entries (each at least two bytes) is bad.
func (r *fastReader) mapLen() int {
	c := r.code()
	var n int
	switch {
	case r.st != fastOK:
		return 0
	case c >= 0x80 && c <= 0x8f:
		n = int(c & 0x0f)
	case c == 0xde:
		n = r.length(2)
	case c == 0xdf:
		n = r.length(4)
	case c == 0xc0:
		return -1
	default:
		// An array-encoded struct, or a type reflection refuses.
		r.fail(fastFallback)
		return 0
	}
	if n > (len(r.b)-r.i)/2 {
		r.fail(fastBad)
		return 0
	}
	return n
}

// strLen reads the header of a string (str or bin, as reflection accepts
// both); -1 is nil.
func (r *fastReader) strLen() int {
	c := r.code()
	switch {
	case r.st != fastOK:
		return 0
	case c >= 0xa0 && c <= 0xbf:
		return int(c & 0x1f)
	case c == 0xd9 || c == 0xc4:
		return r.length(1)
	case c == 0xda || c == 0xc5:
		return r.length(2)
	case c == 0xdb || c == 0xc6:
		return r.length(4)
	case c == 0xc0:
		return -1
	}
	r.fail(fastFallback)
	return 0
}

// key reads a map key without copying it: the result aliases the payload
// and must not outlive the decode.
func (r *fastReader) key() string {
	n := r.strLen()
	if n <= 0 {
		return ""
	}
	p := r.take(n)
	if p == nil {
		return ""
	}
	return unsafe.String(&p[0], n)
}

// str reads a string field (a copy: payload strings outlive the payload).
func (r *fastReader) str() string {
	n := r.strLen()
	if n <= 0 {
		return ""
	}
	p := r.take(n)
	if r.shared != nil && p != nil {
		return r.shared.intern(p)
	}
	return string(p)
}

func (r *fastReader) int() int64 {
	c := r.code()
	switch {
	case r.st != fastOK:
		return 0
	case c <= 0x7f || c >= 0xe0:
		return int64(int8(c))
	}
	switch c {
	case 0xc0:
		return 0
	case 0xcc:
		return int64(r.length(1))
	case 0xcd:
		return int64(r.length(2))
	case 0xce:
		if p := r.take(4); p != nil {
			return int64(binary.BigEndian.Uint32(p))
		}
		return 0
	case 0xcf, 0xd3:
		if p := r.take(8); p != nil {
			return int64(binary.BigEndian.Uint64(p))
		}
		return 0
	case 0xd0:
		if p := r.take(1); p != nil {
			return int64(int8(p[0]))
		}
		return 0
	case 0xd1:
		if p := r.take(2); p != nil {
			return int64(int16(binary.BigEndian.Uint16(p)))
		}
		return 0
	case 0xd2:
		if p := r.take(4); p != nil {
			return int64(int32(binary.BigEndian.Uint32(p)))
		}
		return 0
	}
	r.fail(fastFallback)
	return 0
}

func (r *fastReader) float() float64 {
	if r.st == fastOK && r.i < len(r.b) {
		switch r.b[r.i] {
		case 0xca:
			r.i++
			if p := r.take(4); p != nil {
				return float64(math.Float32frombits(binary.BigEndian.Uint32(p)))
			}
			return 0
		case 0xcb:
			r.i++
			if p := r.take(8); p != nil {
				return math.Float64frombits(binary.BigEndian.Uint64(p))
			}
			return 0
		}
	}
	// Reflection reads any integer (and nil) into a float as well.
	return float64(r.int())
}

func (r *fastReader) bool() bool {
	switch c := r.code(); {
	case r.st != fastOK:
		return false
	case c == 0xc3:
		return true
	case c == 0xc2 || c == 0xc0:
		return false
	}
	r.fail(fastFallback)
	return false
}

// strs reads a []string: nil stays nil and an empty array is an empty,
// non-nil slice, as reflection decodes them.
func (r *fastReader) strs() []string {
	c := r.code()
	var n int
	switch {
	case r.st != fastOK:
		return nil
	case c >= 0x90 && c <= 0x9f:
		n = int(c & 0x0f)
	case c == 0xdc:
		n = r.length(2)
	case c == 0xdd:
		n = r.length(4)
	case c == 0xc0:
		return nil
	default:
		r.fail(fastFallback)
		return nil
	}
	// NB: n comes from the payload; every element takes at least one byte,
	// so a larger n is a lie and must not size an allocation.
	if n > len(r.b)-r.i {
		r.fail(fastBad)
		return nil
	}
	s := make([]string, n)
	for i := range s {
		s[i] = r.str()
	}
	return s
}

// skip passes over one value of any type, as reflection does for a key the
// struct does not have.
func (r *fastReader) skip() { r.skipValues(1) }

// skipValues passes over n values (msgpacklen.Skip): a forged length is
// caught before anything is sized by it.
func (r *fastReader) skipValues(n int) {
	if r.st != fastOK {
		return
	}
	i, st := msgpacklen.Skip(r.b, r.i, n)
	r.i = i
	switch st {
	case msgpacklen.Short:
		r.st = fastBad
	case msgpacklen.Unknown:
		r.st = fastFallback // reflection's error
	}
}

// LengthsFit reports whether every length declared in the first value of b
// fits in b (msgpacklen.Fit): bytes from outside that fail it never reach
// reflection, which would size buffers by those lengths.
func LengthsFit(b []byte) bool { return msgpacklen.Fit(b) }

// fieldSet detects a key given twice in one map: reflection would merge the
// second value into the first (a struct pointer, a slice kept on nil), so
// such a map is left to it.
type fieldSet uint64

func (r *fastReader) once(s *fieldSet, field uint) {
	if *s&(1<<field) != 0 {
		r.fail(fastFallback)
	}
	*s |= 1 << field
}
