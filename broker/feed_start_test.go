package broker

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
)

// TestTheFeedFollowsFromWhereServingStarted: the feed follows the log from the head at which the server started
// accepting connections, not from wherever the head is once its goroutine first runs. It read the head there, so
// what was published in between, by connections already accepted, was never followed: a revocation did not end the
// connection it revoked, which was then pushed mail sent to the revoked task. The feed is held as it starts
// (feedStarting) while a worker says hello and its credential is revoked.
func TestTheFeedFollowsFromWhereServingStarted(t *testing.T) {
	started, resume := make(chan struct{}), make(chan struct{})
	f := newFixture(t, fixtureOpts{feedStarting: func() {
		close(started)
		<-resume
	}})
	held := true
	release := func() {
		if held {
			held = false
			close(resume)
		}
	}
	t.Cleanup(release) // before the fixture's close, which waits for the feed
	select {
	case <-started:
	case <-time.After(guard):
		t.Fatal("the feed did not start")
	}
	s := f.seed()
	o := f.dialOrchestrator(s)
	q := f.dial()
	q.hello(runR, taskQ, s.q)
	p := f.dial()
	p.hello(runR, taskP, s.p)
	o.ok("credential.revoke", map[string]any{"taskId": taskP})
	release()
	mailPThroughTheFeed(o, q, "for whoever holds P's next token")

	frame, err := p.read()
	require.NoError(t, err)
	var first struct {
		ID    *string     `json:"id"`
		Error *wire.Error `json:"error"`
	}
	require.NoError(t, json.Unmarshal(frame, &first))
	require.True(t, first.ID != nil && *first.ID == "" && first.Error != nil,
		"the revoked connection was not ended; its next frame: %s", frame)
	require.Equal(t, wire.CodeRevoked, first.Error.Code)
}
