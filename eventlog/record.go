package eventlog

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Record value layout (see doc.go for the diagram):
//
//	[0]      record format version (recordVersion)
//	[1:5]    crc32c (Castagnoli), big-endian, over bytes [5:]
//	[5:37]   hash = SHA-256(previous record's hash ‖ body)
//	[37:]    body = msgpack array of recordFields fields
const (
	recordVersion   = 1
	recordFields    = 12
	recordHeaderLen = 1 + 4 + sha256.Size
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendBody appends the canonical msgpack body of ev.
func appendBody(b []byte, ev *Event) []byte {
	b = appendArrayHeader(b, recordFields)
	b = appendUint(b, ev.Position)
	b = appendStr(b, ev.Stream)
	b = appendUint(b, ev.StreamVersion)
	b = appendStr(b, ev.Type)
	b = appendUint(b, uint64(ev.SchemaVersion))
	b = appendInt(b, ev.Time)
	b = appendStr(b, ev.CommandID)
	b = appendStr(b, ev.CausationID)
	b = appendStr(b, ev.CorrelationID)
	b = appendStr(b, ev.ActorRole)
	b = appendStr(b, ev.ActorTask)
	return appendBin(b, ev.Payload)
}

// appendRecord appends the stored value of ev, chaining it to prev, and sets
// ev.Hash. Position and StreamVersion must already be assigned.
func appendRecord(dst []byte, prev *[32]byte, ev *Event) []byte {
	start := len(dst)
	dst = append(dst, recordVersion, 0, 0, 0, 0)
	// NB: the hash slot first holds prev, so that one Sum256 over the slot
	// and the body is H(prev ‖ body) without a streaming hasher; the slot
	// then receives the result.
	dst = append(dst, prev[:]...)
	dst = appendBody(dst, ev)
	ev.Hash = sha256.Sum256(dst[start+5:])
	copy(dst[start+5:start+recordHeaderLen], ev.Hash[:])

	crc := crc32.Checksum(dst[start+5:], castagnoli)
	binary.BigEndian.PutUint32(dst[start+1:start+5], crc)
	return dst
}

// chainHash is the hash a record with this body has after prev.
func chainHash(prev *[32]byte, body []byte) [32]byte {
	h := sha256.New()
	h.Write(prev[:])
	h.Write(body)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// DecodeRecord decodes one stored record value into ev. It checks the
// version byte, the checksum and the msgpack structure; it does not check the
// chain (that needs the previous record: see Verify). The value is copied
// once, so ev owns its memory and the caller may reuse value.
//
// Every failure wraps ErrCorrupt; no input makes it panic.
func DecodeRecord(value []byte, ev *Event) error {
	if err := checkRecord(value); err != nil {
		return err
	}
	owned := make([]byte, len(value)-5)
	copy(owned, value[5:])
	return decodeOwned(owned, ev)
}

// decodeRecordTransient decodes like DecodeRecord without the copy: ev's
// strings and Payload alias value, so they are valid only as long as value
// is (a Pebble iterator's value: until the iterator moves).
func decodeRecordTransient(value []byte, ev *Event) error {
	if err := checkRecord(value); err != nil {
		return err
	}
	return decodeOwned(value[5:], ev)
}

// checkRecord validates the framing and checksum of a record value.
func checkRecord(value []byte) error {
	if len(value) < recordHeaderLen+1 {
		return fmt.Errorf("%w: record of %d bytes is shorter than its header", ErrCorrupt, len(value))
	}
	if value[0] != recordVersion {
		return fmt.Errorf("%w: unknown record version %d", ErrCorrupt, value[0])
	}
	want := binary.BigEndian.Uint32(value[1:5])
	if got := crc32.Checksum(value[5:], castagnoli); got != want {
		return fmt.Errorf("%w: checksum mismatch (stored %08x, computed %08x)", ErrCorrupt, want, got)
	}
	return nil
}

// decodeOwned decodes hash ‖ body from a buffer that ev takes ownership of.
func decodeOwned(owned []byte, ev *Event) error {
	copy(ev.Hash[:], owned[:sha256.Size])
	r := reader{b: owned[sha256.Size:]}
	if n := r.arrayLen(); r.err == nil && n != recordFields {
		return fmt.Errorf("%w: record body has %d fields, want %d", ErrCorrupt, n, recordFields)
	}
	ev.Position = r.uint()
	ev.Stream = r.str()
	ev.StreamVersion = r.uint()
	ev.Type = r.str()
	sv := r.uint()
	ev.Time = r.int()
	ev.CommandID = r.str()
	ev.CausationID = r.str()
	ev.CorrelationID = r.str()
	ev.ActorRole = r.str()
	ev.ActorTask = r.str()
	ev.Payload = r.bin()
	if r.err != nil {
		return fmt.Errorf("%w: record body: %v", ErrCorrupt, r.err)
	}
	if r.off != len(r.b) {
		return fmt.Errorf("%w: %d trailing bytes after record body", ErrCorrupt, len(r.b)-r.off)
	}
	if sv > 0xffff {
		return fmt.Errorf("%w: schema version %d out of range", ErrCorrupt, sv)
	}
	ev.SchemaVersion = uint16(sv)
	if ev.Payload == nil {
		ev.Payload = []byte{}
	}
	return nil
}

// recordBody returns the body of a record value already checked by
// checkRecord.
func recordBody(value []byte) []byte { return value[recordHeaderLen:] }

// recordHash returns the stored hash of a record value already checked by
// checkRecord.
func recordHash(value []byte) (h [32]byte) {
	copy(h[:], value[5:recordHeaderLen])
	return h
}
