package commands

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// fingerprintLen is how much of the SHA-256 an outcome keeps: 128 bits. A
// collision lets a principal confuse two of its own requests and nothing
// else, and every byte of an outcome is paid for in every commit.
const fingerprintLen = 16

var fingerprintBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// fingerprint digests a request so that a retry can be told from another
// request reusing its command id: SHA-256 of the method and the canonical
// msgpack encoding of the parsed command (struct fields in declaration
// order, map keys sorted), cut to fingerprintLen bytes. It digests the
// parsed command, not the wire bytes, so a retry that spells the same
// params differently (key order, spacing, an omitted default-free key) is
// the same request.
//
// Submit computes it on the caller's goroutine, once per command with an
// id, so the single writer only compares bytes.
func fingerprint(c Command) ([]byte, error) {
	buf := fingerprintBufs.Get().(*bytes.Buffer)
	defer fingerprintBufs.Put(buf)
	buf.Reset()
	buf.WriteString(c.Kind())
	buf.WriteByte(0)
	enc := msgpack.GetEncoder()
	defer msgpack.PutEncoder(enc)
	enc.Reset(buf)
	enc.SetSortMapKeys(true)
	if err := enc.Encode(c); err != nil {
		return nil, fmt.Errorf("commands: fingerprint %s: %w", c.Kind(), err)
	}
	sum := sha256.Sum256(buf.Bytes())
	return sum[:fingerprintLen], nil
}

// reusedID is the answer to a principal's command id already recorded (or
// being decided in the same group) for a different request. Nothing is
// recorded for it: the id keeps its first request's outcome.
func reusedID() *RejectedError {
	return reject(CodeBadParams, "commandid-reused", "commandId already used for a different request")
}
