package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/projections"
)

// Broker-side failures that have their own wire code. Handlers wrap the underlying error with them (%w) so the
// mapping table below is the only place that knows codes.
var (
	// errReplay: the event log could not be read for events.since / events.subscribe (replay-failed).
	errReplay = errors.New("broker: event log read failed")
	// errWaitTimeout: task.waitStatus reached its timeout (wait-timeout).
	errWaitTimeout = errors.New("broker: wait timed out")
	// errConnClosing: the connection or the server closed while a request waited (close).
	errConnClosing = errors.New("broker: connection closing")
	// errTooLarge: a result does not fit in one frame (oversize-frame).
	errTooLarge = errors.New("broker: result exceeds the frame cap")
)

// mapping is THE table from errors to wire codes (STYLE.md: domain packages own their errors, the broker alone
// maps them). Rows are tried in order and the first match wins. A row with code "" converts the error itself; a
// row with public false sends the code's generic message and has the error logged in full. Anything no row
// matches — commands.ErrFailed, commands.ErrClosed, a bug — is internal: generic text, logged in full.
var mapping = []struct {
	match  func(error) bool
	code   wire.Code
	public bool
	logged bool // not public, and logged already where it happened (with what the log needs), so not again here
}{
	{as[*wire.Error], "", true, false},             // a handler's own answer, sent as is
	{as[*commands.RejectedError], "", true, false}, // a decided rejection: its own code and message
	{is(commands.ErrUnknownMethod), wire.CodeNotImplemented, true, false},
	{is(projections.ErrBadCursor), wire.CodeBadParams, true, false},
	{is(errReplay), wire.CodeReplayFailed, false, false},
	// A cold run the log cannot give back (a read or a table that failed): its records are not known, so its
	// queries and commands are refused as a failed read of the log is. The engine logged it, with the run's id.
	{is(projections.ErrNotReadBack), wire.CodeReplayFailed, false, true},
	{is(errWaitTimeout), wire.CodeWaitTimeout, true, false},
	{is(errConnClosing), wire.CodeClose, true, false},
	{is(context.Canceled), wire.CodeClose, true, false},
	{is(errTooLarge), wire.CodeOversizeFrame, true, false},
	{is(commands.ErrNoSpace), wire.CodeDiskFull, true, false},
	{is(commands.ErrUnavailable), wire.CodeUnavailable, false, false},
}

func is(target error) func(error) bool { return func(err error) bool { return errors.Is(err, target) } }

func as[T error](err error) bool { var t T; return errors.As(err, &t) }

// toWire maps err to the error frame body sent to the client; method names the request (not-implemented's
// message). logFull reports that the error was not meant for the client and must be logged in full.
func toWire(err error, method string) (e *wire.Error, logFull bool) {
	for _, row := range mapping {
		if !row.match(err) {
			continue
		}
		switch {
		case row.code == "":
			return convert(err)
		case row.code == wire.CodeNotImplemented:
			return wire.NotImplemented(method), false
		case !row.public:
			return wire.NewError(row.code, ""), !row.logged
		}
		return wire.NewError(row.code, publicMessage(row.code, err)), false
	}
	return wire.NewError(wire.CodeInternal, ""), true
}

// convert handles the rows that carry their own code.
func convert(err error) (*wire.Error, bool) {
	var we *wire.Error
	if errors.As(err, &we) {
		return we, false
	}
	var rej *commands.RejectedError
	errors.As(err, &rej)
	// A rejection names its wire code; one this build does not know, or one that would close the connection,
	// is a bug in the engine, not the client's fault.
	if c := wire.Code(rej.Code); c.Valid() && !c.Local() && !c.Closes() {
		return wire.NewError(c, rej.Message), false
	}
	return wire.NewError(wire.CodeInternal, ""), true
}

// publicMessage is the text of a mapped broker error: its message without the "broker: " prefix, which names our
// package, not anything the client can act on.
func publicMessage(c wire.Code, err error) string {
	msg := err.Error()
	const prefix = "broker: "
	if len(msg) > len(prefix) && msg[:len(prefix)] == prefix {
		msg = msg[len(prefix):]
	}
	if msg == "" {
		return c.Message()
	}
	return msg
}

// msgLoneSurrogate is why a commandId holding a lone UTF-16 surrogate is refused (wire.HoldsLoneSurrogate).
const msgLoneSurrogate = "commandId holds a lone UTF-16 surrogate (\\ud800..\\udfff without its pair), " +
	"which is no Unicode text"

// badParams builds the bad-params answer for a broker-parsed method, worded like ParseCommand's.
func badParams(method, format string, args ...any) *wire.Error {
	return wire.NewError(wire.CodeBadParams, method+": invalid params: "+fmt.Sprintf(format, args...))
}

// forbidden builds a forbidden answer.
func forbidden(format string, args ...any) *wire.Error {
	return wire.NewError(wire.CodeForbidden, fmt.Sprintf(format, args...))
}
