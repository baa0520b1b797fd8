package broker

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A connection ended between its bind and the start of its idle timer (the feed ends a connection whose credential
// ended as soon as it is bound) starts no timer: one started after the close kept the connection, its buffers and
// its server reachable until IdleTimeout, for every such connection a client could make.
func TestAClosedConnectionStartsNoIdleTimer(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	_, sc := f.workerToServe(f.seed())
	sc.mu.Lock()
	armed := sc.idle
	sc.mu.Unlock()
	require.NotNil(t, armed, "the hello started the idle timer")

	sc.close(reasonEnded)
	sc.startIdleTimer() // as the reader does once the hello is answered
	sc.mu.Lock()
	defer sc.mu.Unlock()
	require.Same(t, armed, sc.idle, "no timer started after the close")
}

// A connection that closes as its idle timer fires, after the timer found it open, is not armed again: a timer
// armed again after the close (for what is left of IdleTimeout since its last request, or all of it for a
// connection that was serving) kept the connection, its buffers and its server reachable for that long.
func TestAClosedConnectionsIdleTimerIsNotArmedAgain(t *testing.T) {
	for _, tc := range []struct {
		name    string
		serving bool // the connection serves a request as it closes: its timer is armed for all of IdleTimeout
	}{
		{name: "a request answered since the timer was armed"},
		{name: "a request being served", serving: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{})
			_, sc := f.workerToServe(f.seed())
			if tc.serving {
				sc.mu.Lock()
				sc.serving = true
				sc.mu.Unlock()
			}
			f.srv.idleFiring = func(c *conn) {
				if c == sc {
					c.close(reasonClientClosed) // the client goes as the timer fires
				}
			}
			sc.idleExpired() // as the timer does when it fires
			sc.mu.Lock()
			defer sc.mu.Unlock()
			require.False(t, sc.idle.Stop(), "the idle timer is not armed after the close")
		})
	}
}
