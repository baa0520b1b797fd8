package events

import (
	"bytes"
	"errors"
	"fmt"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// Errors of the codec. Callers test them with errors.Is; the returned errors
// wrap them with the type and the cause.
var (
	// ErrUnknownType: the type is not part of the contract (or the payload
	// given to EncodePayload is not a payload struct).
	ErrUnknownType = errors.New("events: unknown type")
	// ErrBadPayload: the bytes do not decode into the type's payload.
	ErrBadPayload = errors.New("events: bad payload")
	// ErrUnsupportedVersion: the schema version is 0, newer than this build
	// knows, or older with no upcaster.
	ErrUnsupportedVersion = errors.New("events: unsupported schema version")
)

// maxPooledBuffer bounds the buffers kept in the encoder pool, so one huge
// payload does not pin its buffer forever.
const maxPooledBuffer = 64 << 10

type decoder struct {
	r   bytes.Reader
	dec *msgpack.Decoder
}

// Encode buffers and reflection decoders are pooled: growing a buffer per
// event costs more than encoding a small payload, building a decoder per
// payload more than decoding it, and replay decodes millions of them.
var (
	encodeBuffers = sync.Pool{New: func() any { return new([]byte) }}
	decoders      = sync.Pool{New: func() any {
		d := new(decoder)
		d.dec = msgpack.NewDecoder(&d.r)
		return d
	}}
)

// EncodePayload encodes a payload struct (or a pointer to one) as a msgpack
// map, with the generated encoder of its type (payload_codec_gen.go). The
// result is deterministic and owned by the caller. Safe for concurrent use.
func EncodePayload(p any) ([]byte, error) {
	buf := encodeBuffers.Get().(*[]byte)
	b, ok := appendPayload((*buf)[:0], p)
	if !ok {
		encodeBuffers.Put(buf)
		return nil, fmt.Errorf("%w: payload %T", ErrUnknownType, p)
	}
	// One exact-size copy: the caller keeps it, the pool keeps the room.
	out := bytes.Clone(b)
	if cap(b) <= maxPooledBuffer {
		*buf = b
		encodeBuffers.Put(buf)
	}
	return out, nil
}

// AppendPayload appends the encoding EncodePayload returns to dst: for a
// caller that encodes many payloads into one buffer it reuses (the engine's
// writer, a group at a time). Safe for concurrent use.
func AppendPayload(dst []byte, p any) ([]byte, error) {
	b, ok := appendPayload(dst, p)
	if !ok {
		return dst, fmt.Errorf("%w: payload %T", ErrUnknownType, p)
	}
	return b, nil
}

// DecodePayload decodes b, written at schema version version of type t, into
// a pointer to t's current payload struct. Older versions are upcast first.
// It never panics: errors wrap ErrUnknownType, ErrUnsupportedVersion or
// ErrBadPayload. b is not retained. Safe for concurrent use.
func DecodePayload(t string, version uint16, b []byte) (any, error) {
	return decodePayload(t, version, b, nil)
}

// decodePayload is DecodePayload, sharing strings through strs when it is
// not nil (see Decoder).
func decodePayload(t string, version uint16, b []byte, strs *Decoder) (any, error) {
	k, ok := registry[t]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownType, t)
	}
	if version == k.version {
		if p, st := decodeFast(t, version, b, strs); st == fastOK {
			return checked(t, p)
		}
	}
	switch {
	case version == 0 || version > k.version:
		return nil, fmt.Errorf("%w: %s v%d (current v%d)", ErrUnsupportedVersion, t, version, k.version)
	case !LengthsFit(b):
		return nil, fmt.Errorf("%w: %s: a length runs past the end of the payload", ErrBadPayload, t)
	case version < k.version:
		var err error
		if b, err = upcast(t, version, k.version, b); err != nil {
			return nil, err
		}
	}
	p := k.zero()
	if err := decodeInto(p, b); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadPayload, t, err)
	}
	return checked(t, p)
}

// validator is a payload that can be impossible although it decodes: one
// another component acts on as it reads it (ImportCheckpoint).
type validator interface{ Validate() error }

// checked returns p, or ErrBadPayload when p is a validator that refuses
// itself: such bytes are damage, whatever wrote them.
func checked(t string, p any) (any, error) {
	if v, ok := p.(validator); ok {
		if err := v.Validate(); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrBadPayload, t, err)
		}
	}
	return p, nil
}

// decodeInto decodes exactly b into p: trailing bytes are an error, because a
// record holds one payload and anything after it means corruption.
func decodeInto(p any, b []byte) (err error) {
	d := decoders.Get().(*decoder)
	defer func() {
		// NB: msgpack decodes untrusted lengths and types by reflection; a
		// panic there must become an error, never take the daemon down. A
		// decoder that panicked is dropped rather than pooled.
		if r := recover(); r != nil {
			err = fmt.Errorf("decoder panic: %v", r)
			return
		}
		decoders.Put(d)
	}()
	d.r.Reset(b)
	d.dec.Reset(&d.r)
	if err := d.dec.Decode(p); err != nil {
		return err
	}
	if n := d.r.Len(); n != 0 {
		return fmt.Errorf("%d trailing bytes", n)
	}
	return nil
}
