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
