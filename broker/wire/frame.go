package wire

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/crewlog/crewlog/events/jsonscan"
)

// Framing errors. All four mean the byte stream can no longer be trusted: the broker closes the connection without
// writing an error frame (D§7.2 — no request id is known), and logs the close as oversize-frame, malformed-frame,
// read-error and inbound-full respectively. Match them with errors.Is; the returned errors carry detail after the
// sentinel.
var (
	// ErrFrameTooLarge: a line (or an outbound frame) would exceed the frame cap, newline included.
	ErrFrameTooLarge = errors.New("wire: frame too large")
	// ErrMalformed: a complete line that is not a single JSON object in valid UTF-8, or an object that is not a
	// valid request (DecodeRequest).
	ErrMalformed = errors.New("wire: malformed frame")
	// ErrTruncated: the stream ended in the middle of a line.
	ErrTruncated = errors.New("wire: truncated frame")
	// ErrNoRoom: a line longer than the read-ahead found no room in the Reader's SpillBudget (UseSpillBudget).
	ErrNoRoom = errors.New("wire: no room to buffer the frame")
)

func malformed(why string) error { return fmt.Errorf("%w: %s", ErrMalformed, why) }

func tooLarge(limit int) error {
	return fmt.Errorf("%w: exceeds %d bytes including the newline", ErrFrameTooLarge, limit)
}

// checkFrame accepts exactly one JSON object, optionally surrounded by JSON whitespace.
//
// NB: invalid UTF-8 is refused although Node would decode it to U+FFFD and carry on. A pi-crew peer never sends it
// (Node encodes strings as valid UTF-8), and accepting it would let the broker store text that differs from what
// the peer sent.
func checkFrame(line []byte) error {
	if !utf8.Valid(line) {
		return malformed("invalid UTF-8")
	}
	if i := jsonscan.SkipSpace(line, 0); i == len(line) || line[i] != '{' {
		return malformed("not a JSON object")
	}
	if !validJSON(line) {
		return malformed("invalid JSON")
	}
	return nil
}

// isBlank reports a line holding only JSON whitespace. pi-crew skips empty lines; a line of spaces would fail its
// JSON.parse, but skipping it too costs nothing and cannot change the meaning of any frame.
func isBlank(b []byte) bool { return jsonscan.SkipSpace(b, 0) == len(b) }
