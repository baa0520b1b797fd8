package events

import (
	"encoding/binary"
	"math/bits"
	"unsafe"
)

// Decoder decodes payloads like DecodePayload, and shares the short strings
// it has seen lately between the payloads it returns: the same task id,
// role, cwd or subId, repeated by event after event of a log, is then one
// string instead of one allocation per event. Replay decodes millions of
// payloads, and allocation is most of what a hand-written decode costs.
//
// Concurrency: a Decoder is used by one goroutine; a nil *Decoder decodes
// with DecodePayload. Errors: as DecodePayload.
type Decoder struct {
	slots *[internSlots]string
}

const (
	// internSlots is the size of the recent-strings table: a few
	// thousand covers the ids a stretch of log keeps repeating.
	internBits  = 12
	internSlots = 1 << internBits
	// maxInterned is the longest string shared; longer ones (prompts,
	// bodies) are rarely repeated and are copied as usual.
	maxInterned = 64
)

// NewDecoder returns a Decoder with an empty table.
func NewDecoder() *Decoder {
	return &Decoder{slots: new([internSlots]string)}
}

// Decode decodes b, written at schema version version of type t, into a
// pointer to t's current payload struct; see DecodePayload.
func (d *Decoder) Decode(t string, version uint16, b []byte) (any, error) {
	if d == nil {
		return DecodePayload(t, version, b)
	}
	return decodePayload(t, version, b, d)
}

// Intern returns a string equal to s that shares no memory with s (the
// table's, when it holds one): for strings that alias a buffer about to be
// reused, the repeated ones (a run id, an event type, a role) costing no
// allocation.
func (d *Decoder) Intern(s string) string {
	if s == "" {
		return ""
	}
	return d.intern(unsafe.Slice(unsafe.StringData(s), len(s)))
}

// intern returns p as a string, the one returned before for the same bytes
// when it is still in the table. NB: a table slot holds one string; a
// collision replaces it, which costs an allocation, never a wrong string.
func (d *Decoder) intern(p []byte) string {
	if len(p) > maxInterned {
		return string(p)
	}
	slot := &d.slots[slotOf(p)]
	if *slot == string(p) {
		return *slot
	}
	s := string(p)
	*slot = s
	return s
}

// slotOf places a short string in the table. It mixes the first and last
// eight bytes and the length: ids that differ anywhere near either end
// (gc-00001234, 01_work) land apart, and a collision only costs a copy.
func slotOf(p []byte) uint64 {
	var a, b uint64
	if n := len(p); n >= 8 {
		a, b = binary.LittleEndian.Uint64(p), binary.LittleEndian.Uint64(p[n-8:])
	} else {
		for i, c := range p {
			a |= uint64(c) << (8 * i)
		}
	}
	h := (a ^ bits.RotateLeft64(b, 29) ^ uint64(len(p))) * 0x9e3779b97f4a7c15
	return h >> (64 - internBits)
}
