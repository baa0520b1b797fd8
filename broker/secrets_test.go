package broker

import (
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/events"
)

// loggedText is a slog handler that keeps the text of every record (its message and attributes) in text, which the
// server's goroutines log at once.
func loggedText(text *strings.Builder) slog.Handler {
	var mu sync.Mutex
	return recordHandler(func(r slog.Record) {
		mu.Lock()
		defer mu.Unlock()
		text.WriteString(r.Message)
		r.Attrs(func(a slog.Attr) bool {
			text.WriteString(" " + a.String())
			return true
		})
		text.WriteString("\n")
	})
}

// TestNoTokenReachesALogLineOrAnError: the secrets the broker mints go only to the callers of run.create and
// credential.issue. With every log line kept (debug level), a life of their credentials — hellos accepted, a hello
// with a wrong secret, a second hello, the revocation that ends a connection and a hello with the revoked secret —
// writes no token into a log line, and no answer but the minting ones carries one: not the hello's ack, not an
// error frame.
func TestNoTokenReachesALogLineOrAnError(t *testing.T) {
	var logged strings.Builder
	f := newFixture(t, fixtureOpts{opts: Options{Logger: slog.New(loggedText(&logged))}})
	s := f.seed()
	const wrong = "not-the-secret-of-P-but-as-long-as-one-is-here"
	secrets := []string{s.orch, s.p, s.q, testAdminToken, wrong}

	var answers []wire.Response
	hello := func(c *client, task, token string) wire.Response {
		r := c.call("hello", map[string]any{"protocol": 1, "runId": runR, "taskId": task, "token": token})
		answers = append(answers, r)
		return r
	}
	p := f.dial()
	require.Nil(t, hello(p, taskP, s.p).Error)
	q := f.dial()
	require.Nil(t, hello(q, taskQ, s.q).Error)
	second := hello(q, taskQ, s.q)
	require.NotNil(t, second.Error, "a second hello is refused")
	q.closed()
	bad := f.dial()
	require.NotNil(t, hello(bad, taskP, wrong).Error, "a wrong secret is refused")
	bad.closed()

	o := f.dial()
	o.hello(runR, events.OrchestratorKey, s.orch)
	o.ok("credential.revoke", map[string]any{"taskId": taskP})
	end := p.untilError()
	require.Equal(t, wire.CodeRevoked, end.Error.Code, "the revocation ended P's connection")
	answers = append(answers, end)
	revoked := f.dial()
	require.Equal(t, wire.CodeRevoked, hello(revoked, taskP, s.p).Error.Code)
	revoked.closed()
	f.close() // every goroutine that may log has ended

	lines := logged.String() // no lock: every goroutine that logs has ended
	require.Contains(t, lines, "hello rejected", "the refusals were logged")
	for _, secret := range secrets {
		require.NotContains(t, lines, secret, "a secret reached a log line")
		for _, r := range answers {
			require.NotContains(t, string(r.Result), secret, "a secret reached a hello's ack")
			if r.Error != nil {
				require.NotContains(t, r.Error.Message, secret, "a secret reached an error frame")
			}
		}
	}
}
