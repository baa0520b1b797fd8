package eventlog

import "fmt"

// FatalError is the value the log panics with when Pebble meets an error it cannot continue from and calls its
// logger's Fatalf (a failed write or sync of its MANIFEST, a commit its pipeline cannot finish, a table that fails
// its checksum): the panic is raised on the goroutine that called into Pebble, often with Pebble's locks held, so
// that the store answers nothing more (an append on it waits for good). The log has failed stop before the panic
// (Failed, Err): every later write and read is refused with ErrFailed and reaches no Pebble.
//
// Never recover it and go on: a recover() of a goroutine that may call the log calls RepanicFatal first, so that
// the process exits (status 2) and its supervisor restarts it; the next Open recovers every acknowledged append.
type FatalError struct {
	Msg string // Pebble's message
	Err error  // the first error among Fatalf's arguments (ENOSPC, EIO, ...), if any
}

func (e *FatalError) Error() string { return "eventlog: pebble fatal: " + e.Msg }

func (e *FatalError) Unwrap() error { return e.Err }

// newFatalError is Fatalf's message as a *FatalError.
func newFatalError(format string, args ...any) *FatalError {
	e := &FatalError{Msg: fmt.Sprintf(format, args...)}
	for _, a := range args {
		if err, ok := a.(error); ok {
			e.Err = err
			break
		}
	}
	return e
}

// RepanicFatal panics again with v when v is a *FatalError, and returns otherwise. Call it first in every recover
// block of a goroutine that may call the log: a recovered ordinary panic (a bad request's) may end what it served
// and let the process go on, a Pebble fatal may not.
func RepanicFatal(v any) {
	if f, ok := v.(*FatalError); ok {
		panic(f)
	}
}

// failFatal fails the log stop at Pebble's fatal error f, and refuses every later read too (readable): Pebble,
// which panics next, holds its state in doubt.
func (l *Log) failFatal(f *FatalError) {
	l.fatal.CompareAndSwap(nil, f)
	l.fail(f)
}

// fatalRefusal is why l reads nothing more (nil when it may): Pebble's fatal error.
func (l *Log) fatalRefusal() error {
	if f := l.fatal.Load(); f != nil {
		return fmt.Errorf("%w (cause: %w)", ErrFailed, f)
	}
	return nil
}
