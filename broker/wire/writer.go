package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
