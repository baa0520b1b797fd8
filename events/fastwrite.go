package events

import "github.com/crewlog/crewlog/events/msgpackappend"

// The generated encoders (payload_codec_gen.go) write msgpack with these;
// TestGeneratedEncoderMatchesReflection holds them to msgpack's reflection
// encoding.

func appendMapLen(b []byte, n int) []byte       { return msgpackappend.MapLen(b, n) }
func appendString(b []byte, s string) []byte    { return msgpackappend.String(b, s) }
func appendStrings(b []byte, s []string) []byte { return msgpackappend.Strings(b, s) }
func appendBool(b []byte, v bool) []byte        { return msgpackappend.Bool(b, v) }
func appendInt(b []byte, n int64) []byte        { return msgpackappend.Int(b, n) }
func appendInt64(b []byte, n int64) []byte      { return msgpackappend.Int64(b, n) }
func appendUint32(b []byte, n uint32) []byte    { return msgpackappend.Uint32(b, n) }
func appendFloat64(b []byte, f float64) []byte  { return msgpackappend.Float64(b, f) }

// AppendMessageData appends d (not nil) as msgpack's reflection encoder
// writes it, with the generated encoder of the payloads that hold it: the
// snapshot encodes every message's data, one per settled delegation.
func AppendMessageData(b []byte, d *MessageData) []byte { return appendMessageData(b, d) }
