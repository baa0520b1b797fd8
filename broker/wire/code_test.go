package wire

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// The spellings are the contract with pi-crew (D§7.6); a rename here breaks its clients.
func TestCodes(t *testing.T) {
	require.Equal(t, []Code{
		"protocol", "auth", "stale-token", "revoked", "too-many-connections", "idle-timeout",
		"oversize-frame", "forbidden", "bad-params", "no-manifest", "no-task", "durable-failed", "replay-failed",
		"close", "wait-timeout", "wait-failed", "steer-failed", "escalate-failed", "policy-disabled",
		"policy-denied", "busy", "too-many-waits", "too-many-subscriptions", "not-implemented", "timeout", "rate-limit",
		"internal", "disk-full", "quota-exceeded", "unavailable",
		"fallback-sticky", "bad-method", "no-socket", "encode-failed", "missing-credentials", "closed",
		"exhausted", "request-failed", "socket-error",
	}, Codes())

	var closing, local []Code
	for _, c := range Codes() {
		require.True(t, c.Valid(), c)
		require.NotEmpty(t, c.Message(), c)
		if c.Closes() {
			closing = append(closing, c)
		}
		if c.Local() {
			local = append(local, c)
		}
	}
	require.Equal(t, []Code{CodeProtocol, CodeAuth, CodeStaleToken, CodeRevoked, CodeTooManyConnections,
		CodeIdleTimeout}, closing)
	require.Len(t, local, 9)

	for _, c := range []Code{"", "bad-request", "Auth", "unknown"} {
		require.False(t, c.Valid(), c)
		require.Empty(t, c.Message(), c)
		require.False(t, c.Closes(), c)
		require.False(t, c.Local(), c)
	}
}

func TestError(t *testing.T) {
	e := NewError(CodeAuth, "")
	require.Equal(t, &Error{Code: CodeAuth, Message: MsgNotAuthed}, e)
	require.EqualError(t, e, "wire: auth: not authed")
	require.Equal(t, &Error{CodePolicyDenied, "depth 5 > 4"}, Errorf(CodePolicyDenied, "depth %d > %d", 5, 4))
	require.Equal(t, "method 'nope' is not implemented", NotImplemented("nope").Message)

	require.Equal(t, CodeAuth, CodeOf(fmt.Errorf("dial: %w", e)))
	require.Equal(t, Code(""), CodeOf(errors.New("plain")))
	require.Equal(t, Code(""), CodeOf(nil))
}
