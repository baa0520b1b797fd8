package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
)

// AppendFrame appends v, encoded as one JSON object and a '\n', to dst. maxFrame is the cap (0 means
// DefaultMaxFrame; otherwise it must pass ValidateMaxFrame).
//
// It refuses, returning dst unchanged: a value encoding/json cannot encode, a value that does not encode to an
// object, and a frame over the cap (an error matching ErrFrameTooLarge). pi-crew's broker logs and drops such an
// outbound frame rather than closing the connection; what to do is the caller's decision.
//
// The encoding never contains a raw newline (encoding/json escapes control characters in strings and compacts
// json.RawMessage and Marshaler output) and does not HTML-escape <, > and &, so the bytes match what JSON.stringify
// would produce for the same value except that U+2028 and U+2029 are escaped.
func AppendFrame(dst []byte, v any, maxFrame int) ([]byte, error) {
	limit, err := resolveMaxFrame(maxFrame)
	if err != nil {
		return dst, err
	}
	if out, ok := appendPlain(dst, v); ok {
		return withinCap(dst, out, limit)
	}
	buf := bytes.NewBuffer(dst)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // Encode writes the terminating '\n'.
		return dst, fmt.Errorf("wire: encode frame: %w", err)
	}
	out := buf.Bytes()
	frame := out[len(dst):]
	if frame[0] != '{' {
		return dst, errors.New("wire: encode frame: not a JSON object")
	}
	if len(frame) > limit {
		return dst, fmt.Errorf("%w: %d bytes exceeds %d including the newline", ErrFrameTooLarge, len(frame), limit)
	}
	return out, nil
}

// AppendCompactResponse is AppendFrame of CompactResponse{ID: id, Result: result}, the frame of every answer the
// broker sends, without making an interface value of it (an allocation per answer).
func AppendCompactResponse(dst []byte, id string, result json.RawMessage, maxFrame int) ([]byte, error) {
	limit, err := resolveMaxFrame(maxFrame)
	if err != nil {
		return dst, err
	}
	r := CompactResponse{ID: id, Result: result}
	if out, ok := appendCompactResponse(dst, r); ok {
		return withinCap(dst, out, limit)
	}
	return AppendFrame(dst, r, maxFrame)
}

// AppendCompactEvent is AppendFrame of Event{Name: name, Data: data, Seq: seq} for data its producer wrote as
// compact, valid JSON (json.Marshal's output, or such outputs joined by JSON punctuation): data is copied as it is
// rather than validated and compacted again, and no interface value is made of the Event (an allocation per push).
// The bytes are AppendFrame's as long as the producer keeps its word; data holding a newline is compacted all the
// same, so a frame stays one line whatever the producer wrote.
func AppendCompactEvent(dst []byte, name string, data json.RawMessage, seq uint64, maxFrame int) ([]byte, error) {
	limit, err := resolveMaxFrame(maxFrame)
	if err != nil {
		return dst, err
	}
	if data == nil || !plainString(name) || bytes.IndexByte(data, '\n') >= 0 {
		return AppendFrame(dst, Event{Name: name, Data: data, Seq: seq}, maxFrame)
	}
	out := appendEventHead(dst, name, len(data))
	out = append(out, data...) // NB: compact already, as its producer guarantees
	out = strconv.AppendUint(append(out, `,"seq":`...), seq, 10)
	return withinCap(dst, append(out, '}', '\n'), limit)
}

// ResultRoom is the bytes of result JSON a response to request id can hold in a frame of maxFrame bytes, as
// AppendCompactResponse writes it: the frame less {"id":,"result":}, its newline and the id as written (plain, or
// escaped as AppendFrame escapes it); 0 when not even the id fits. NB: callers measure every command's answer with
// it, so a plain id, the common case, is counted without encoding it.
func ResultRoom(id string, maxFrame int) int {
	limit, err := resolveMaxFrame(maxFrame)
	if err != nil {
		return 0
	}
	if plainString(id) {
		return max(limit-compactResponseAround-len(id), 0)
	}
	f, err := AppendFrame(nil, CompactResponse{ID: id, Result: json.RawMessage(`0`)}, limit)
	if err != nil {
		return 0
	}
	return limit - (len(f) - len(`0`))
}

// withinCap returns out, dst with a frame appended, when the frame is within limit bytes; else dst and an error
// matching ErrFrameTooLarge.
func withinCap(dst, out []byte, limit int) ([]byte, error) {
	if n := len(out) - len(dst); n > limit {
		return dst, fmt.Errorf("%w: %d bytes exceeds %d including the newline", ErrFrameTooLarge, n, limit)
	}
	return out, nil
}

// appendPlain encodes, without reflection, the frames every call and push is made of: a request (a client sends
// one per call), a success response (the broker answers one) and a push, when their strings need no escaping. The
// bytes are encoding/json's (tests compare them): the strings as they are between quotes, the raw value compacted
// as encoding/json compacts a json.RawMessage without HTML escaping (a CompactResponse's result is copied: it is
// compact already). ok is false for any other value, and for a
// raw value that is not valid JSON: the caller encodes generically, to fail as encoding/json does.
func appendPlain(dst []byte, v any) (out []byte, ok bool) {
	var raw json.RawMessage
	seq, hasSeq := uint64(0), false
	switch r := v.(type) {
	case Event:
		if !plainString(r.Name) {
			return dst, false
		}
		out = appendEventHead(dst, r.Name, len(r.Data)+len("null"))
		raw, seq, hasSeq = r.Data, r.Seq, true
	case Response:
		if r.Error != nil || !plainString(r.ID) {
			return dst, false
		}
		out = slices.Grow(dst, len(`{"id":"","result":}`)+len(r.ID)+len(r.Result)+len("null\n"))
		out = append(out, `{"id":"`...)
		out = append(out, r.ID...)
		out = append(out, `","result":`...)
		raw = r.Result
	case CompactResponse:
		return appendCompactResponse(dst, r)
	case CompactRequest:
		if r.Params == nil || !plainString(r.ID) || !plainString(r.Method) || bytes.IndexByte(r.Params, '\n') >= 0 {
			return dst, false
		}
		out = appendRequestHead(dst, r.ID, r.Method, len(r.Params)+len("}\n"))
		out = append(out, r.Params...) // NB: compact already, as its producer guarantees
		return append(out, '}', '\n'), true
	case Request:
		if !plainString(r.ID) || !plainString(r.Method) {
			return dst, false
		}
		out = appendRequestHead(dst, r.ID, r.Method, len(r.Params)+len("null}\n"))
		raw = r.Params
	default:
		return dst, false
	}
	if raw == nil {
		out = append(out, "null"...)
	} else {
		var ok bool
		if out, ok = appendCompact(out, raw); !ok {
			return dst, false
		}
	}
	if hasSeq {
		out = strconv.AppendUint(append(out, `,"seq":`...), seq, 10)
	}
	return append(out, '}', '\n'), true
}

// compactResponseAround is what appendCompactResponse writes around a plain id and the result, the newline included.
const compactResponseAround = len(`{"id":"","result":}` + "\n")

// appendCompactResponse is appendPlain of a CompactResponse.
func appendCompactResponse(dst []byte, r CompactResponse) (out []byte, ok bool) {
	// NB: a newline would end the frame early; compact JSON has none (strings escape it), so a result that holds
	// one is not compact, and is encoded, compacted, as a Response's.
	if r.Result == nil || !plainString(r.ID) || bytes.IndexByte(r.Result, '\n') >= 0 {
		return dst, false
	}
	out = slices.Grow(dst, compactResponseAround+len(r.ID)+len(r.Result))
	out = append(out, `{"id":"`...)
	out = append(out, r.ID...)
	out = append(out, `","result":`...)
	out = append(out, r.Result...) // NB: compact already, as its producer guarantees
	return append(out, '}', '\n'), true
}

// appendEventHead appends a push frame up to its data, with room for data bytes more, its seq and its end.
func appendEventHead(dst []byte, name string, data int) []byte {
	out := slices.Grow(dst, len(`{"event":"","data":,"seq":18446744073709551615}`+"\n")+len(name)+data)
	out = append(out, `{"event":"`...)
	out = append(out, name...)
	return append(out, `","data":`...)
}

// appendRequestHead appends a request frame up to its params, with room for more bytes after them.
func appendRequestHead(dst []byte, id, method string, more int) []byte {
	out := slices.Grow(dst, len(`{"id":"","method":"","params":`)+len(id)+len(method)+more)
	out = append(out, `{"id":"`...)
	out = append(out, id...)
	out = append(out, `","method":"`...)
	out = append(out, method...)
	return append(out, `","params":`...)
}

// plainString reports whether s encodes in JSON as itself between quotes: printable ASCII without '"' and '\\'.
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// WriteFrame encodes v as AppendFrame does and writes the frame to w with a single Write, so frames from one
// writer never interleave on the stream. Nothing is written when encoding fails.
//
// Concurrency: WriteFrame holds no state; callers serialise writes to one w (a connection has one writer).
func WriteFrame(w io.Writer, v any, maxFrame int) error {
	frame, err := AppendFrame(nil, v, maxFrame)
	if err != nil {
		return err
	}
	if _, err := w.Write(frame); err != nil {
		return fmt.Errorf("wire: write frame: %w", err)
	}
	return nil
}

// marshal encodes v without HTML escaping and without the encoder's trailing newline. The MarshalJSON methods of
// this package use it because encoding/json never undoes the escaping a Marshaler applied.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}
