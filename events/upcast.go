package events

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// upcaster rewrites the msgpack bytes of a payload at one schema version into
// the bytes of the next version. Working on bytes keeps old payload structs
// out of the package: only the current struct of each type exists.
type upcaster func(b []byte) ([]byte, error)

type upcastKey struct {
	typ  string
	from uint16
}

// upcasters holds one entry per (type, version) that is no longer current.
// To change a payload's shape: bump its version in registry.go and add here
// the step from the old version. Stored events keep their bytes; readers see
// the new shape because every read decodes through DecodePayload.
var upcasters = map[upcastKey]upcaster{
	{TypeTaskCreated, 1}: taskCreatedV1toV2,
}

// upcast brings b from version from up to version to, one step at a time.
func upcast(t string, from, to uint16, b []byte) ([]byte, error) {
	for v := from; v < to; v++ {
		up := upcasters[upcastKey{typ: t, from: v}]
		if up == nil {
			return nil, fmt.Errorf("%w: %s v%d has no upcaster to v%d", ErrUnsupportedVersion, t, v, v+1)
		}
		var err error
		if b, err = up(b); err != nil {
			return nil, fmt.Errorf("%w: upcasting %s v%d: %v", ErrBadPayload, t, v, err)
		}
	}
	return b, nil
}

// taskCreatedV1toV2 adds kind, derived from stepId by pi-crew's rule
// (TaskKindOf): version 1 had no kind, and a task without a stepId was a
// shadow by definition. NB: a version-1 workflow task created without a
// stepId therefore reads as a shadow, as every decision recorded then
// treated it; replay of an old log decides as the log did. Tasks created
// since carry the kind their creator recorded (task.create: workflow).
func taskCreatedV1toV2(b []byte) ([]byte, error) {
	var v1 struct {
		StepID string `msgpack:"stepId"`
	}
	if err := decodeInto(&v1, b); err != nil {
		return nil, err
	}
	return appendMapEntry(b, "kind", TaskKindOf(v1.StepID))
}

// appendMapEntry returns a copy of the msgpack map m with one more string
// entry. The existing entries keep their bytes, so an upcast adds a field
// without re-encoding (or reordering) the rest.
func appendMapEntry(m []byte, key, value string) ([]byte, error) {
	if len(m) == 0 {
		return nil, errors.New("empty payload")
	}
	out := make([]byte, 0, len(m)+len(key)+len(value)+8)
	var rest []byte
	switch c := m[0]; {
	case c >= 0x80 && c < 0x8f: // fixmap with room for one more
		out = append(out, c+1)
		rest = m[1:]
	case c == 0x8f: // fixmap of 15 → map16 of 16
		out = append(out, 0xde, 0, 16)
		rest = m[1:]
	case c == 0xde && len(m) >= 3:
		n := binary.BigEndian.Uint16(m[1:3])
		if n == 0xffff {
			out = append(out, 0xdf)
			out = binary.BigEndian.AppendUint32(out, 1<<16)
		} else {
			out = append(out, 0xde)
			out = binary.BigEndian.AppendUint16(out, n+1)
		}
		rest = m[3:]
	case c == 0xdf && len(m) >= 5:
		n := binary.BigEndian.Uint32(m[1:5])
		if n == 0xffffffff {
			return nil, errors.New("map too large")
		}
		out = append(out, 0xdf)
		out = binary.BigEndian.AppendUint32(out, n+1)
		rest = m[5:]
	default:
		return nil, fmt.Errorf("payload is not a map (first byte 0x%02x)", c)
	}
	out = append(out, rest...)
	out = appendMsgpackStr(out, key)
	return appendMsgpackStr(out, value), nil
}

// appendMsgpackStr appends s in msgpack's shortest string encoding.
func appendMsgpackStr(b []byte, s string) []byte {
	switch n := len(s); {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n <= 0xff:
		b = append(b, 0xd9, byte(n))
	case n <= 0xffff:
		b = append(b, 0xda)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, 0xdb)
		b = binary.BigEndian.AppendUint32(b, uint32(n))
	}
	return append(b, s...)
}
