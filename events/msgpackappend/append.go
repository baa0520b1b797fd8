package msgpackappend

import (
	"encoding/binary"
	"math"
)

// NB: each writes exactly what msgpack v5.4.1's reflection encoder writes
// for the same Go type with default options (see encode_number.go and
// encode_slice.go there): stored payloads are hashed into the log's chain,
// so a byte of difference would be a different event.
// events.TestGeneratedEncoderMatchesReflection and
// projections.TestSnapshotEncoderMatchesReflection hold them to it.

// MapLen writes a map header of n entries.
func MapLen(b []byte, n int) []byte { return appendLen(b, n, 0x80, 0xde, 0xdf) }

// ArrayLen writes an array header of n elements.
func ArrayLen(b []byte, n int) []byte { return appendLen(b, n, 0x90, 0xdc, 0xdd) }

// appendLen writes a map or an array header: the fixed form below 16, then
// 16 and 32 bits.
func appendLen(b []byte, n int, fixed, code16, code32 byte) []byte {
	switch {
	case n < 16:
		return append(b, fixed|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, code16), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, code32), uint32(n))
}

func String(b []byte, s string) []byte {
	switch n := len(s); {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n < 256:
		b = append(b, 0xd9, byte(n))
	case n <= math.MaxUint16:
		b = binary.BigEndian.AppendUint16(append(b, 0xda), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xdb), uint32(n))
	}
	return append(b, s...)
}

// Strings writes nil as nil and an empty slice as an empty array, as
// reflection does (engine.configured tells the two apart).
func Strings(b []byte, s []string) []byte {
	if s == nil {
		return append(b, 0xc0)
	}
	b = ArrayLen(b, len(s))
	for _, v := range s {
		b = String(b, v)
	}
	return b
}

func Bool(b []byte, v bool) []byte {
	if v {
		return append(b, 0xc3)
	}
	return append(b, 0xc2)
}

// Int is msgpack's compact integer, which reflection uses for int.
func Int(b []byte, n int64) []byte {
	switch {
	case n >= 0:
		return Uint(b, uint64(n))
	case n >= -32:
		return append(b, byte(n))
	case n >= math.MinInt8:
		return append(b, 0xd0, byte(n))
	case n >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(b, 0xd1), uint16(n))
	case n >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(n))
}

func Uint(b []byte, n uint64) []byte {
	switch {
	case n <= math.MaxInt8:
		return append(b, byte(n))
	case n <= math.MaxUint8:
		return append(b, 0xcc, byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xcd), uint16(n))
	case n <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xcf), n)
}

// Int64: reflection keeps an int64's width (9 bytes) unless compact
// integers are asked for, and they are not.
func Int64(b []byte, n int64) []byte {
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(n))
}

func Uint32(b []byte, n uint32) []byte {
	return binary.BigEndian.AppendUint32(append(b, 0xce), n)
}

func Float64(b []byte, f float64) []byte {
	return binary.BigEndian.AppendUint64(append(b, 0xcb), math.Float64bits(f))
}

// Uint64: reflection keeps a uint64's width (9 bytes).
func Uint64(b []byte, n uint64) []byte {
	return binary.BigEndian.AppendUint64(append(b, 0xcf), n)
}

// Uint16 keeps its width (3 bytes), as Encoder.EncodeUint16 does.
func Uint16(b []byte, n uint16) []byte {
	return binary.BigEndian.AppendUint16(append(b, 0xcd), n)
}

func Nil(b []byte) []byte { return append(b, 0xc0) }
