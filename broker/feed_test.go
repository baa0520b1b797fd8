package broker

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/events"
)

// TestMailboxPushOnlyAfterHello: a message published before a connection's hello is not pushed to it, however
// late the feed gets to it; one published after is.
func TestMailboxPushOnlyAfterHello(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	s := f.seed()
	p := f.dial()
	p.hello(runR, taskP, s.p)
	head := f.eng.Head()
	f.srv.pushMessage(runR, head, &events.MailboxAppended{ID: "before", To: taskP, Body: "b"}) // the feed, late
	f.srv.pushMessage(runR, head+1, &events.MailboxAppended{ID: "after", To: taskP, Body: "b"})
	frame, err := p.read()
	require.NoError(t, err)
	var push struct {
		Event string `json:"event"`
		Data  struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(frame, &push))
	require.Equal(t, wire.EventMailboxMessage, push.Event)
	require.Equal(t, "after", push.Data.ID, "the message published before the hello is not pushed")
}
