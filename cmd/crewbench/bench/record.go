package bench

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
)

// A record is how the physical-limit file and the plain Pebble baseline
// store one event: the envelope a log needs (position, stream, version,
// type, time) around crewlog's msgpack payload, with a checksum.
//
//	+-----------+-------------+-------------------------------------------------+
//	| len:4 BE  | crc32c:4 BE | pos:8 | ver:8 | time:8 | stream | type | payload |
//	+-----------+-------------+-------------------------------------------------+
//	stream and type are uvarint-length-prefixed; len counts what follows crc.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errBadRecord is a record that does not decode.
var errBadRecord = errors.New("bench: bad record")

func appendRecord(dst []byte, pos uint64, stream string, version uint64, typ string, nowNs int64,
	payload []byte) []byte {
	dst, start := appendRecordHead(dst, pos, stream, version, typ, nowNs)
	return sealRecord(append(dst, payload...), start)
}

// appendRecordHead appends a record's envelope, its length and checksum left
// to sealRecord, and returns where the record starts: the payload is
// appended right after it, so it can be encoded in place
// (events.AppendPayload, as crewlog's writer encodes), with no copy of its own.
func appendRecordHead(dst []byte, pos uint64, stream string, version uint64, typ string,
	nowNs int64) (_ []byte, start int) {
	start = len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint64(dst, pos)
	dst = binary.BigEndian.AppendUint64(dst, version)
	dst = binary.BigEndian.AppendUint64(dst, uint64(nowNs))
	dst = binary.AppendUvarint(dst, uint64(len(stream)))
	dst = append(dst, stream...)
	dst = binary.AppendUvarint(dst, uint64(len(typ)))
	dst = append(dst, typ...)
	return dst, start
}

// sealRecord writes the length and checksum of the record that starts at
// start and runs to dst's end.
func sealRecord(dst []byte, start int) []byte {
	body := dst[start+8:]
	binary.BigEndian.PutUint32(dst[start:], uint32(len(body)))
	binary.BigEndian.PutUint32(dst[start+4:], crc32.Checksum(body, castagnoli))
	return dst
}

// decodedRecord is a record read back.
type decodedRecord struct {
	Pos, Version uint64
	Stream, Type string
	Payload      []byte
}

// nextRecord decodes the record at the start of b and returns the rest.
func nextRecord(b []byte) (decodedRecord, []byte, error) {
	var r decodedRecord
	if len(b) < 8 {
		return r, nil, errBadRecord
	}
	n := int(binary.BigEndian.Uint32(b))
	if len(b) < 8+n || crc32.Checksum(b[8:8+n], castagnoli) != binary.BigEndian.Uint32(b[4:]) || n < 24 {
		return r, nil, errBadRecord
	}
	body, rest := b[8:8+n], b[8+n:]
	r.Pos, r.Version = binary.BigEndian.Uint64(body), binary.BigEndian.Uint64(body[8:])
	body = body[24:]
	str := func() (string, bool) {
		l, k := binary.Uvarint(body)
		if k <= 0 || uint64(len(body)-k) < l {
			return "", false
		}
		s := string(body[k : k+int(l)])
		body = body[k+int(l):]
		return s, true
	}
	var ok1, ok2 bool
	r.Stream, ok1 = str()
	r.Type, ok2 = str()
	if !ok1 || !ok2 {
		return r, nil, errBadRecord
	}
	r.Payload = body
	return r, rest, nil
}

// eachRecord calls fn for every record of b, in order, up to its end or to
// a zero header (the zero-filled tail of a preallocated file).
func eachRecord(b []byte, fn func(decodedRecord) error) error {
	for len(b) >= 8 && binary.BigEndian.Uint64(b) != 0 {
		rec, rest, err := nextRecord(b)
		if err != nil {
			return err
		}
		if err := fn(rec); err != nil {
			return err
		}
		b = rest
	}
	if len(b) > 0 && len(b) < 8 {
		return errBadRecord
	}
	return nil
}
