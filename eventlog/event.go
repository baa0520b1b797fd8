package eventlog

import "fmt"

// Event is one record of the log: the envelope of SPEC §2 and an opaque
// msgpack payload. The log never interprets Type or Payload.
//
// Position, StreamVersion and Hash are assigned by Append; values set by the
// caller are overwritten. An Event returned by an Iterator owns its memory
// (its strings and Payload share one buffer that nothing mutates), so it
// stays valid after the iterator moves on.
type Event struct {
	Position      uint64 // global, gapless from 1
	Stream        string // the run id
	StreamVersion uint64 // gapless from 1 within Stream
	Type          string // dotted event type, e.g. "delegate.admitted"
	SchemaVersion uint16 // version of the payload schema of Type
	Time          int64  // unix nanoseconds, from the engine clock
	CommandID     string
	CausationID   string
	CorrelationID string
	ActorRole     string
	ActorTask     string
	Payload       []byte   // msgpack, owned by the caller's codec
	Hash          [32]byte // SHA-256(previous hash ‖ record body)
}

// Limits enforced by Append. They keep one record comfortably inside a
// Pebble value and make every length field of the format small.
const (
	MaxStreamLen = 255
	MaxTypeLen   = 128
	MaxIDLen     = 256 // command, causation and correlation ids, actor fields
)

// validate checks the caller-supplied fields of an event.
func (e *Event) validate(maxPayload int) error {
	switch {
	case e.Stream == "" || len(e.Stream) > MaxStreamLen:
		return fmt.Errorf("%w: stream must be 1..%d bytes, got %d", ErrInvalid, MaxStreamLen, len(e.Stream))
	case e.Type == "" || len(e.Type) > MaxTypeLen:
		return fmt.Errorf("%w: type must be 1..%d bytes, got %d", ErrInvalid, MaxTypeLen, len(e.Type))
	case len(e.CommandID) > MaxIDLen, len(e.CausationID) > MaxIDLen, len(e.CorrelationID) > MaxIDLen,
		len(e.ActorRole) > MaxIDLen, len(e.ActorTask) > MaxIDLen:
		return fmt.Errorf("%w: ids and actor fields must be at most %d bytes", ErrInvalid, MaxIDLen)
	case len(e.Payload) > maxPayload:
		return fmt.Errorf("%w: payload of %d bytes exceeds the limit of %d", ErrInvalid, len(e.Payload), maxPayload)
	}
	return nil
}

// CheckEvent reports whether Append would accept e (the caller-supplied
// fields only). A writer that applies events to its own state before the
// append checks them first, so that a refused append never leaves that
// state ahead of the log.
func (l *Log) CheckEvent(e *Event) error { return e.validate(l.opts.MaxPayloadBytes) }
