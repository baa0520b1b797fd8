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
	var fp [fingerprintLen]byte
	if err := fingerprintInto(&fp, c); err != nil {
		return nil, err
	}
	return fp[:], nil
}

// fingerprintInto writes fingerprint(c) into fp. The commands with a
// canonical encoder of their own (fingerprint_canonical.go) are encoded on
// the stack; the rest by reflection.
func fingerprintInto(fp *[fingerprintLen]byte, c Command) error {
	var stack [512]byte
	b := append(append(stack[:0], c.Kind()...), 0)
	if b, ok := appendCanonical(b, c); ok {
		sum := sha256.Sum256(b)
		copy(fp[:], sum[:])
		return nil
	}
	buf := fingerprintBufs.Get().(*bytes.Buffer)
	defer fingerprintBufs.Put(buf)
	buf.Reset()
	buf.Write(b)
	if err := encodeCanonical(buf, c); err != nil {
		return fmt.Errorf("commands: fingerprint %s: %w", c.Kind(), err)
	}
	sum := sha256.Sum256(buf.Bytes())
	copy(fp[:], sum[:])
	return nil
}

// cutFingerprint is the fingerprint a build before DelegateSettle.SentText gave c, a settle whose text its caller
// cut: the digest of the text as cut, which such a build recorded with its outcome; nil for any other request. A
// retry matches either (answerRetry), so an outcome recorded then answers a retry cut the same, through a frame
// that cuts as the one of the time did.
func cutFingerprint(c Command) ([]byte, error) {
	s, ok := c.(*DelegateSettle)
	if !ok || s.SentText == "" {
		return nil, nil
	}
	cut := *s
	cut.SentText = ""
	return fingerprint(&cut)
}

// encodeCanonical writes c's canonical encoding by reflection: struct
// fields in declaration order, map keys sorted.
func encodeCanonical(buf *bytes.Buffer, c Command) error {
	enc := msgpack.GetEncoder()
	defer msgpack.PutEncoder(enc)
	enc.Reset(buf)
	enc.SetSortMapKeys(true)
	return enc.Encode(c)
}

// reusedID is the answer to a principal's command id already recorded (or
// being decided in the same group) for a different request. Nothing is
// recorded for it: the id keeps its first request's outcome.
func reusedID() *RejectedError {
	return reject(CodeBadParams, "commandid-reused", "commandId already used for a different request")
}
