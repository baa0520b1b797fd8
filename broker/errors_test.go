package broker

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/projections"
)

func TestErrorMapping(t *testing.T) {
	cases := []struct {
		err     error
		code    wire.Code
		msg     string
		logFull bool
	}{
		{wire.NewError(wire.CodeForbidden, "no"), wire.CodeForbidden, "no", false},
		{&commands.RejectedError{Code: "policy-denied", Reason: "slots-exhausted", Message: "full"}, wire.CodePolicyDenied, "full", false},
		{fmt.Errorf("wrapped: %w", &commands.RejectedError{Code: "no-task", Message: "gone"}), wire.CodeNoTask, "gone", false},
		{&commands.RejectedError{Code: "made-up", Message: "x"}, wire.CodeInternal, "internal error", true},
		{&commands.RejectedError{Code: "auth", Message: "x"}, wire.CodeInternal, "internal error", true},
		{fmt.Errorf("%w: %q", commands.ErrUnknownMethod, "x.y"), wire.CodeNotImplemented, "method 'x.y' is not implemented", false},
		{commands.ErrFailed, wire.CodeInternal, "internal error", true},
		{commands.ErrClosed, wire.CodeInternal, "internal error", true},
		{errors.New("anything"), wire.CodeInternal, "internal error", true},
		{fmt.Errorf("%w: cursor", projections.ErrBadCursor), wire.CodeBadParams, "projections: bad cursor: cursor", false},
		{fmt.Errorf("%w: disk", errReplay), wire.CodeReplayFailed, "event replay failed", true},
		{errWaitTimeout, wire.CodeWaitTimeout, "wait timed out", false},
		{errConnClosing, wire.CodeClose, "connection closing", false},
		{fmt.Errorf("%w: m", errTooLarge), wire.CodeOversizeFrame, "result exceeds the frame cap: m", false},
		{fmt.Errorf("%w: %w", commands.ErrNoSpace, errors.New("daemon: 3 MiB free")), wire.CodeDiskFull,
			"commands: too little free disk space; retry later: daemon: 3 MiB free", false},
		{fmt.Errorf("cluster: no writer answered: %w: nats: timeout", commands.ErrUnavailable), wire.CodeUnavailable,
			"no writer answered; retry with the same commandId", true},
	}
	for _, tc := range cases {
		t.Run(tc.err.Error(), func(t *testing.T) {
			we, logFull := toWire(tc.err, "x.y")
			require.Equal(t, tc.code, we.Code)
			require.Equal(t, tc.msg, we.Message)
			require.Equal(t, tc.logFull, logFull)
		})
	}
}

// TestInternalAndReplayFailed drives the two codes no transcript can reach: a stopped engine (internal, generic
// text) and an unreadable log (replay-failed).
func TestInternalAndReplayFailed(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	s := f.seed()
	o := f.dial()
	o.hello(runR, "orchestrator", s.orch)
	require.NoError(t, f.eng.Close())
	e := o.fails("run.transition", map[string]any{"to": "blocked"}, wire.CodeInternal)
	require.Equal(t, "internal error", e.Message)
	// NB: the log is closed under the running server on purpose (crewd closes
	// the broker first). The mailbox feed may be in the middle of a read, so
	// Close may report its iterator, and the feed may then fail on the
	// closed store; neither is what this test checks.
	if err := f.log.Close(); err != nil {
		require.ErrorContains(t, err, "leaked iterators")
	}
	o.fails("events.since", map[string]any{}, wire.CodeReplayFailed)
	f.panics.Store(0)
}
