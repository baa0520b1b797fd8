package wire

import (
	"errors"
	"fmt"
)

// Error is the body of an error frame, {"code": …, "message": …}, and a Go error, so a client can return what the
// broker sent and callers can test it with CodeOf.
//
// NB: the message is sent as is. pi-crew passes every message through its secret redaction; the broker must build
// messages that hold no secret (or redact them) before they get here.
//
// An *Error is a value: safe to share once built, not to modify while another goroutine reads it.
type Error struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
}

// NewError returns an error with code c and message msg; an empty msg takes c's default message.
func NewError(c Code, msg string) *Error {
	if msg == "" {
		msg = c.Message()
	}
	return &Error{Code: c, Message: msg}
}

// Errorf returns an error with code c and a formatted message.
func Errorf(c Code, format string, args ...any) *Error {
	return &Error{Code: c, Message: fmt.Sprintf(format, args...)}
}

// NotImplemented returns pi-crew's answer to an unknown method. method has passed ValidMethod, so it is safe to echo.
func NotImplemented(method string) *Error {
	return Errorf(CodeNotImplemented, "method '%s' is not implemented", method)
}

// Error formats e as "wire: <code>: <message>".
func (e *Error) Error() string { return "wire: " + string(e.Code) + ": " + e.Message }

// CodeOf returns the code of the first *Error in err's chain, or "" when there is none.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
