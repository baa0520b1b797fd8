package commands

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// Wire codes a rejection carries (D§7.6). The broker maps a *RejectedError
// to an error frame with exactly this code.
const (
	CodeForbidden      = "forbidden"
	CodeBadParams      = "bad-params"
	CodeNoManifest     = "no-manifest"
	CodeNoTask         = "no-task"
	CodePolicyDisabled = "policy-disabled"
	CodePolicyDenied   = "policy-denied"
	// CodeQuotaExceeded and CodeRateLimit refuse a command because its run
	// reached a quota (crewlog only; rate-limit is a code pi-crew reserved).
	CodeQuotaExceeded = "quota-exceeded"
	CodeRateLimit     = "rate-limit"
	// CodeOversizeFrame refuses a message body past its bound: pi-crew's
	// broker answers its body checks so (D§7.6), not bad-params.
	CodeOversizeFrame = "oversize-frame"
)

// RejectedError is a decided rejection. Code is the wire code; Reason is the
// machine-readable reason (a delegate.rejected reason such as
// "slots-exhausted", or a short word such as "invalid-params" for rejections
// that record no event); Message is the human text sent to the caller.
type RejectedError struct {
	Code    string
	Reason  string
	Message string
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("commands: rejected (%s/%s): %s", e.Code, e.Reason, e.Message)
}

func reject(code, reason, format string, args ...any) *RejectedError {
	return &RejectedError{Code: code, Reason: reason, Message: cutMessage(fmt.Sprintf(format, args...))}
}

func badParams(format string, args ...any) *RejectedError {
	return reject(CodeBadParams, "invalid-params", format, args...)
}

// rejectedOf is the *RejectedError err is or wraps, or nil. NB: the common
// answers (nil, a bare *RejectedError) are told without errors.As, whose
// target would otherwise be allocated for every command the writer decides.
func rejectedOf(err error) *RejectedError {
	switch e := err.(type) {
	case nil:
		return nil
	case *RejectedError:
		return e
	}
	var rej *RejectedError
	if errors.As(err, &rej) {
		return rej
	}
	return nil
}

// MaxRejectionMessageBytes bounds a rejection's message. Messages quote what
// the client sent (an id, a recipient), and a message is answered and
// recorded with the command's outcome for good: a refused request must not
// make either as large as the frame that carried it.
const MaxRejectionMessageBytes = 1024

// cutMessage cuts msg to MaxRejectionMessageBytes, on a rune boundary, and
// marks the cut with an ellipsis.
func cutMessage(msg string) string {
	if len(msg) <= MaxRejectionMessageBytes {
		return msg
	}
	const ellipsis = "…"
	n := MaxRejectionMessageBytes - len(ellipsis)
	for n > 0 && !utf8.RuneStart(msg[n]) {
		n--
	}
	return msg[:n] + ellipsis
}
