package events

//go:generate go run ./internal/gen

// The encoders and decoders of every payload type are generated from the
// struct definitions and the registry by internal/gen into
// payload_codec_gen.go (run `go generate ./events` after changing a payload
// struct or a schema version; TestGeneratedCodecIsCurrent fails until
// then). Replay decodes every payload of the log and the engine encodes
// every event it writes; msgpack's reflection costs several times the rest
// of either. fastread.go and fastwrite.go hold the reader, the writers and
// the rules they share.
//
// A decoder is used only for the schema version it was generated for:
// older versions are upcast and decoded by reflection, and so is any
// encoding the fast reader does not take on (fastFallback).
// TestFastDecodeMatchesReflection pins every decoder to reflection's
// result, field by field, and TestGeneratedEncoderMatchesReflection every
// encoder to reflection's bytes.

// payloadDecoder decodes one type's payload at one schema version.
type payloadDecoder struct {
	version uint16
	decode  func(r *fastReader) any
}

// decodeFast decodes b, a payload of type t at schema version version,
// without reflection when a decoder for that version exists. With
// fastFallback (or no decoder) the caller decodes by reflection.
func decodeFast(t string, version uint16, b []byte, strs *Decoder) (any, fastStatus) {
	f, ok := payloadDecoders[t]
	if !ok || f.version != version {
		return nil, fastFallback
	}
	return f.run(b, strs)
}

// run decodes b; strs, when not nil, shares repeated strings.
func (f payloadDecoder) run(b []byte, strs *Decoder) (any, fastStatus) {
	if len(b) == 0 || b[0] == 0xc0 {
		// A nil payload decodes to a zero struct by reflection; it never
		// occurs in a log, so it is not worth a path of its own.
		return nil, fastFallback
	}
	r := fastReader{b: b, shared: strs}
	p := f.decode(&r)
	switch {
	case r.st != fastOK:
		return nil, r.st
	case r.i != len(b):
		return nil, fastFallback // trailing bytes: reflection's error
	}
	return p, fastOK
}
