package eventlog

import (
	"errors"
	"fmt"
)

// Sentinel errors. Callers test them with errors.Is; the concrete errors
// returned carry the detail (position, stream, cause).
var (
	// ErrCorrupt marks any error that comes from stored bytes that do not
	// decode, do not match their checksum, or break the chain. Every layer
	// that reads the log wraps it rather than inventing its own.
	ErrCorrupt = errors.New("eventlog: corrupt")
	// ErrConflict is wrapped by *ConflictError when an expected stream
	// version does not hold.
	ErrConflict = errors.New("eventlog: stream version conflict")
	// ErrFailed is returned by every append after a write or sync error:
	// the log fails stop and must be reopened.
	ErrFailed = errors.New("eventlog: log failed after a write error; reopen to recover")
	// ErrClosed is returned by operations on a closed log.
	ErrClosed = errors.New("eventlog: closed")
	// ErrReadOnly is returned by writes to a log opened read-only.
	ErrReadOnly = errors.New("eventlog: opened read-only")
	// ErrDuplicateCommand is returned when an append carries a command id
	// whose outcome is already recorded (or is being recorded).
	ErrDuplicateCommand = errors.New("eventlog: command id already decided")
	// ErrNotFound is returned by lookups that find nothing.
	ErrNotFound = errors.New("eventlog: not found")
	// ErrFormatTooNew is returned by Open for a store written by a newer
	// crewlog.
	ErrFormatTooNew = errors.New("eventlog: store format is newer than this build supports")
	// ErrInsideStore is returned by Checkpoint for a destination inside the
	// store it would copy.
	ErrInsideStore = errors.New("eventlog: inside the store")
	// ErrInvalid wraps every rejection of malformed append input.
	ErrInvalid = errors.New("eventlog: invalid append")
)

// ConflictError reports a failed expected-version check. Nothing of the
// append that carried it was written.
type ConflictError struct {
	Stream   string
	Expected int64  // as given: Any, NoStream or an exact version
	Actual   uint64 // the stream's version at the time of the check
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("eventlog: stream %q is at version %d, expected %s", e.Stream, e.Actual,
		expectedString(e.Expected))
}

// Unwrap makes errors.Is(err, ErrConflict) hold.
func (e *ConflictError) Unwrap() error { return ErrConflict }

func expectedString(v int64) string {
	switch {
	case v == Any:
		return "any version"
	case v == NoStream:
		return "no stream"
	default:
		return fmt.Sprintf("version %d", v)
	}
}

// CorruptError names where corruption was found. Position is the first bad
// event position, or 0 when the damage is not in an event record (the head,
// an index entry, a command outcome, a snapshot).
type CorruptError struct {
	Position uint64
	Key      string // printable form of the key that holds the bad bytes
	Reason   string
}

func (e *CorruptError) Error() string {
	if e.Position > 0 {
		return fmt.Sprintf("eventlog: corrupt at position %d (%s): %s", e.Position, e.Key, e.Reason)
	}
	return fmt.Sprintf("eventlog: corrupt %s: %s", e.Key, e.Reason)
}

// Unwrap makes errors.Is(err, ErrCorrupt) hold.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

func corruptf(pos uint64, key []byte, format string, args ...any) *CorruptError {
	return &CorruptError{Position: pos, Key: keyString(key), Reason: fmt.Sprintf(format, args...)}
}
