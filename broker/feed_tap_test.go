package broker

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
)

// TestTheFeedReadsFromTheLogOnlyWhatItsTapDropped: the feed takes the published events from the engine's tap, and
// reads from the log only what the tap dropped while the feed fell behind it (or everything, without a tap): a
// worker is pushed every message sent to it, once each and in order, and a revocation published meanwhile ends the
// connection it revoked, whichever way the feed got the events. Held as it starts (feedStarting) while more events
// are published than its tap of 4 holds, the feed reads the rest from the log; kept up, it reads nothing there.
func TestTheFeedReadsFromTheLogOnlyWhatItsTapDropped(t *testing.T) {
	for _, c := range []struct {
		name     string
		held     bool
		tapBound int
		logReads bool
	}{
		{"kept up", false, 0, false},
		{"fell behind its tap", true, 4, true},
		{"without a tap", false, -1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			resume := make(chan struct{})
			fo := fixtureOpts{tapBound: c.tapBound}
			if c.held {
				fo.feedStarting = func() { <-resume }
			}
			f := newFixture(t, fo)
			released := false
			release := func() {
				if !released {
					released = true
					close(resume)
				}
			}
			t.Cleanup(release) // before the fixture's close, which waits for the feed

			s := f.seed()
			o := f.dialOrchestrator(s)
			p, q := f.dial(), f.dial()
			p.hello(runR, taskP, s.p)
			q.hello(runR, taskQ, s.q)
			const sent = 6
			for i := range sent {
				o.ok("msg.send", map[string]any{"to": taskP, "body": fmt.Sprintf("m%d", i)})
			}
			o.ok("credential.revoke", map[string]any{"taskId": taskQ})
			release()

			require.Equal(t, wire.CodeRevoked, q.untilError().Error.Code, "the revocation ended Q's connection")
			o.ok("msg.send", map[string]any{"to": taskP, "body": fmt.Sprintf("m%d", sent)})
			for i := range sent + 1 {
				require.Equal(t, fmt.Sprintf(`"m%d"`, i), nextPushBody(p), "push %d (a body is pushed as its JSON)", i)
			}
			if c.logReads {
				require.NotZero(t, f.srv.feedLogReads.Load(), "the feed read what its tap lacked from the log")
			} else {
				require.Zero(t, f.srv.feedLogReads.Load(), "the feed read the log though its tap held every event")
			}
		})
	}
}

// nextPushBody reads c's frames up to its next mailbox.message push, and returns the pushed message's body.
func nextPushBody(c *client) string {
	c.t.Helper()
	var m struct {
		Body string `json:"body"`
	}
	require.NoError(c.t, json.Unmarshal(c.untilPush(), &m))
	return m.Body
}
