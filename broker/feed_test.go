package broker

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/events/jsonstring/jsonref"
)

// TestMailboxPushOnlyAfterHello: a message published before a connection's hello is not pushed to it, however
// late the feed gets to it; one published after is.
func TestMailboxPushOnlyAfterHello(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	s := f.seed()
	p := f.dial()
	p.hello(runR, taskP, s.p)
	head := f.eng.Head()
	var sc pushScratch
	f.srv.pushMessage(&sc, runR, head, &events.MailboxAppended{ID: "before", To: taskP, Body: "b"}) // the feed, late
	f.srv.pushMessage(&sc, runR, head+1, &events.MailboxAppended{ID: "after", To: taskP, Body: "b"})
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

// TestMailboxPushEncodesAsJSONMarshal: a mailbox.message push is the frame of the Event of json.Marshal's mailboxPush,
// byte for byte (from Go 1.27 up to the two spellings jsonref.Comparable names), on messages filled at random (strings
// with HTML characters, quotes, line separators, control characters, non-ASCII and invalid UTF-8; a questionId left
// out for omitempty, to the run inbox or not), and over the cap it is refused as that frame is.
func TestMailboxPushEncodesAsJSONMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 9))
	var sc pushScratch
	for i := range 3000 {
		var m events.MailboxAppended
		fillRandom(r, reflect.ValueOf(&m).Elem(), 0)
		switch i % 5 {
		case 0:
			m.QuestionID = ""
		case 1:
			m.To = events.RunInbox
		case 2:
			m.Body = "line\nbreak\ttab\x01\x1f\u2029" + m.Body
		}
		to := m.To
		if to == events.RunInbox {
			to = runInboxName
		}
		data, err := json.Marshal(mailboxPush{ID: m.ID, From: m.From, To: to, Body: m.Body, Kind: m.Kind,
			Priority: m.Priority, QuestionID: m.QuestionID})
		require.NoError(t, err)
		want, err := wire.AppendFrame(nil, wire.Event{Name: wire.EventMailboxMessage, Data: data}, wire.MaxFrameFloor)
		got, gotErr := mailboxPushFrame(&sc, &m, wire.MaxFrameFloor)
		require.Equal(t, err, gotErr)
		require.Equal(t, string(jsonref.Comparable(want)), string(jsonref.Comparable(got)), "%#v", m)
	}
	big := &events.MailboxAppended{ID: "m", To: taskP, Body: strings.Repeat("<", wire.MaxFrameFloor/6)}
	_, err := mailboxPushFrame(&sc, big, wire.MaxFrameFloor)
	require.ErrorIs(t, err, wire.ErrFrameTooLarge, "a body of a sixth of the cap takes more than the frame escaped")
}

// TestMailboxPushAllocatesItsFrameOnly: encoding a mailbox push into the feed's scratch allocates the frame it
// queues and nothing else, where json.Marshal's reflection, the interface values of the push and its Event, and a
// second pass over the data made four (a fifth was its list of connections); a body too large for the scratch to keep
// is let go.
func TestMailboxPushAllocatesItsFrameOnly(t *testing.T) {
	m := &events.MailboxAppended{ID: "0197a8f0-4c1e-7c3a-9d2b-5e6f7a8b9c0d", From: "delegate:s1", To: taskP,
		Body: commands.ResultBody("s1", commands.OutcomeOK, "done: <14> call sites & \"3\" on the hot path"),
		Kind: events.KindGroupJoin, Priority: events.PriorityNormal}
	var sc pushScratch
	_, err := mailboxPushFrame(&sc, m, 0)
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := mailboxPushFrame(&sc, m, 0); err != nil {
			panic(err)
		}
	})
	if raceDetector {
		require.LessOrEqual(t, allocs, 2.0, "the frame, its room made apart under the race detector (race_on_test.go)")
	} else {
		require.Equal(t, 1.0, allocs)
	}
	long := &events.MailboxAppended{ID: "m", To: taskP, Body: strings.Repeat("b", 2*maxPushScratch)}
	_, err = mailboxPushFrame(&sc, long, 0)
	require.NoError(t, err)
	require.Nil(t, sc.data, "a scratch grown past maxPushScratch is not kept")
}
