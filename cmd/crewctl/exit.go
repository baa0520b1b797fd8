package main

import (
	"errors"
	"fmt"
)

// Exit codes. Scripts branch on them, so each means one thing.
const (
	exitOK      = 0 // done, nothing wrong
	exitProblem = 1 // the command ran and found a problem: corruption, a broken invariant, drift, differences
	exitUsage   = 2 // the command line is wrong
	// exitOpen: the store could not be opened or read (nothing was checked), or the daemon not reached, or it could
	// not read its own (replay-failed).
	exitOpen = 3
)

// exitError carries an exit code out of a command. Commands return one for
// every failure; anything else that reaches run came from parsing the
// command line.
type exitError struct {
	code int
	err  error
	// hint is crewctl's advice, printed on a line of its own under the error.
	hint string
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf("crewctl: "+format, args...)}
}

func openErr(err error) error { return &exitError{code: exitOpen, err: err} }

// unreadable is the error of a command whose read of the store in dir failed with err (not damage: an I/O error),
// so that nothing was checked: exit 3, as when the store does not open.
func unreadable(label, dir string, err error) error {
	// NB: not damage: a read that failed (the disk, the file system, permissions) says nothing of the bytes
	// stored, and restoring a backup over a store that may be intact would lose what was written since.
	return hinted(openErr(fmt.Errorf("crewctl: %s: could not read the store %s: %w", label, dir, err)),
		"the store was not checked, not found damaged; mend what keeps it from being read and run this again")
}

func problemf(format string, args ...any) error {
	return &exitError{code: exitProblem, err: fmt.Errorf("crewctl: "+format, args...)}
}

// hinted gives err, an exitError, crewctl's advice on what to do about it.
func hinted(err error, hint string) error {
	var ee *exitError
	if errors.As(err, &ee) {
		ee.hint = hint
	}
	return err
}

// found is the error of a command that printed its findings; stderr gets
// the one-line summary.
func found(what string) error {
	return &exitError{code: exitProblem, err: errors.New("crewctl: " + what)}
}

// codeOf maps an error returned by the command tree to the exit code.
func codeOf(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return exitUsage
}
