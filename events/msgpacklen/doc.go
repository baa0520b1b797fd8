// Package msgpacklen passes over msgpack values without decoding them, and
// so checks that every length they declare fits in the bytes that hold
// them.
//
// NB: msgpack v5.4.1 sizes some buffers by a declared length before reading
// the data behind it (its allocation limit does not apply everywhere: a
// []byte field or a slice of structs is made at its declared length), so a
// few bytes can ask for gigabytes, a fatal error no recover catches. Bytes
// from outside that fail Fit never reach reflection: an event's payload
// (events), a command forwarded by another node (commands), a message of a
// replicated log's stream (eventlog/natslog).
//
// A leaf that imports nothing but encoding/binary, so that the log's
// backends may use it without depending on the domain.
package msgpacklen
