// Package msgpackappend appends msgpack values to a byte slice, for the
// encoders that replace msgpack's reflection on hot paths (the events
// payload codec, the projections snapshot, the canonical encoding of the
// commands a command id's fingerprint digests).
package msgpackappend
