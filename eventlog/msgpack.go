package eventlog

import (
	"encoding/binary"
	"errors"
	"unsafe"
)

// A minimal msgpack codec for the fixed record envelope. The envelope is
// standard msgpack (any msgpack reader can decode it), but it is written and
// read by hand: reflection-based decoding costs 5–7 µs per event, this costs
// a few hundred nanoseconds, and replay speed is decode speed.
//
// The writer always picks the shortest encoding, so for given field values
// there is exactly one byte string: the hash chain covers those bytes.

var errShort = errors.New("truncated")

func appendArrayHeader(b []byte, n int) []byte {
	if n < 16 {
		return append(b, 0x90|byte(n))
	}
	b = append(b, 0xdc)
	return binary.BigEndian.AppendUint16(b, uint16(n))
}

func appendUint(b []byte, v uint64) []byte {
	switch {
	case v < 1<<7:
		return append(b, byte(v))
	case v < 1<<8:
		return append(b, 0xcc, byte(v))
	case v < 1<<16:
		return binary.BigEndian.AppendUint16(append(b, 0xcd), uint16(v))
	case v < 1<<32:
		return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(v))
	default:
		return binary.BigEndian.AppendUint64(append(b, 0xcf), v)
	}
}

// appendInt writes non-negative values as unsigned (as msgpack prescribes for
// the shortest form) and negative ones as int64.
func appendInt(b []byte, v int64) []byte {
	if v >= 0 {
		return appendUint(b, uint64(v))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(v))
}

func appendStr(b []byte, s string) []byte {
	n := len(s)
	switch {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n < 1<<8:
		b = append(b, 0xd9, byte(n))
	case n < 1<<16:
		b = binary.BigEndian.AppendUint16(append(b, 0xda), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xdb), uint32(n))
	}
	return append(b, s...)
}

func appendBin(b []byte, p []byte) []byte {
	n := len(p)
	switch {
	case n < 1<<8:
		b = append(b, 0xc4, byte(n))
	case n < 1<<16:
		b = binary.BigEndian.AppendUint16(append(b, 0xc5), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xc6), uint32(n))
	}
	return append(b, p...)
}

// reader decodes from a byte slice that it never copies. Strings it returns
// alias the slice, so the caller must own that slice and never mutate it.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *reader) next(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || len(r.b)-r.off < n {
		r.fail(errShort)
		return nil
	}
	p := r.b[r.off : r.off+n]
	r.off += n
	return p
}

func (r *reader) byte1() byte {
	p := r.next(1)
	if p == nil {
		return 0
	}
	return p[0]
}

func (r *reader) arrayLen() int {
	c := r.byte1()
	switch {
	case r.err != nil:
		return 0
	case c&0xf0 == 0x90:
		return int(c & 0x0f)
	case c == 0xdc:
		if p := r.next(2); p != nil {
			return int(binary.BigEndian.Uint16(p))
		}
		return 0
	}
	r.fail(errors.New("want array"))
	return 0
}

func (r *reader) uint() uint64 {
	c := r.byte1()
	switch {
	case r.err != nil:
		return 0
	case c < 0x80:
		return uint64(c)
	case c == 0xcc:
		return uint64(r.byte1())
	case c == 0xcd:
		if p := r.next(2); p != nil {
			return uint64(binary.BigEndian.Uint16(p))
		}
	case c == 0xce:
		if p := r.next(4); p != nil {
			return uint64(binary.BigEndian.Uint32(p))
		}
	case c == 0xcf:
		if p := r.next(8); p != nil {
			return binary.BigEndian.Uint64(p)
		}
	default:
		r.fail(errors.New("want unsigned integer"))
	}
	return 0
}

func (r *reader) int() int64 {
	if r.err == nil && r.off < len(r.b) && r.b[r.off] == 0xd3 {
		r.off++
		if p := r.next(8); p != nil {
			return int64(binary.BigEndian.Uint64(p))
		}
		return 0
	}
	v := r.uint()
	if v > 1<<63-1 {
		r.fail(errors.New("integer overflows int64"))
	}
	return int64(v)
}

func (r *reader) strBytes() []byte {
	c := r.byte1()
	var n int
	switch {
	case r.err != nil:
		return nil
	case c&0xe0 == 0xa0:
		n = int(c & 0x1f)
	case c == 0xd9:
		n = int(r.byte1())
	case c == 0xda:
		if p := r.next(2); p != nil {
			n = int(binary.BigEndian.Uint16(p))
		}
	case c == 0xdb:
		if p := r.next(4); p != nil {
			n = int(binary.BigEndian.Uint32(p))
		}
	default:
		r.fail(errors.New("want string"))
		return nil
	}
	return r.next(n)
}

// str returns a string aliasing the reader's buffer (no copy).
func (r *reader) str() string {
	p := r.strBytes()
	if len(p) == 0 {
		return ""
	}
	return unsafe.String(&p[0], len(p))
}

func (r *reader) bin() []byte {
	c := r.byte1()
	var n int
	switch {
	case r.err != nil:
		return nil
	case c == 0xc4:
		n = int(r.byte1())
	case c == 0xc5:
		if p := r.next(2); p != nil {
			n = int(binary.BigEndian.Uint16(p))
		}
	case c == 0xc6:
		if p := r.next(4); p != nil {
			n = int(binary.BigEndian.Uint32(p))
		}
	default:
		r.fail(errors.New("want binary"))
		return nil
	}
	return r.next(n)
}
