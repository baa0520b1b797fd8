package broker

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
)

// A lone UTF-16 surrogate escape (\ud800 without its pair; JavaScript's JSON.stringify writes one for a string cut
// between the two halves of an emoji) decodes to U+FFFD: text crewlog would keep and answer is not the text the
// client sent, and two strings that differ only there would be one. So a request id holding one closes the
// connection, as an invalid request does (the id cannot be echoed), and params holding one are refused
// bad-params, before anything is decided or recorded. A pair is text, and reads back as the character it spells.
func TestLoneSurrogateIsRefused(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	s := f.seed()

	t.Run("request id", func(t *testing.T) {
		w := f.dialAs(t)
		w.hello(runR, taskP, s.p)
		w.sendLine(`{"id":"a\ud800","method":"ping","params":null}`)
		w.closed()
	})

	t.Run("params", func(t *testing.T) {
		w := f.dialAs(t)
		w.hello(runR, taskP, s.p)
		q := f.dialAs(t)
		q.hello(runR, taskQ, s.q)
		inbox := func() []any { return q.ok("msg.inbox", map[string]any{})["messages"].([]any) }
		before := len(inbox())
		refused := requestCountsOf(f.srv)[[2]string{"msg.send", string(wire.CodeBadParams)}]

		// Two command ids a client holds apart; as U+FFFD they were one, and the second was refused as a reuse.
		for _, tc := range []struct{ id, params string }{
			{"c1", `{"to":"Q","body":"one","commandId":"c\ud800"}`},
			{"c2", `{"to":"Q","body":"two","commandId":"c\udbff"}`},
			{"b1", `{"to":"Q","body":"cut \ud83d"}`},
			{"b2", `{"to":"Q","body":{"k":["\ude00"]}}`},
			{"s1", `{"to":"Q","body":"x","subject":"\udc00\ud800"}`},
		} {
			w.sendLine(`{"id":"` + tc.id + `","method":"msg.send","params":` + tc.params + `}`)
			r := answerTo(t, w, tc.id)
			require.NotNil(t, r.Error, "%s: %s", tc.params, r.Result)
			require.Equal(t, wire.CodeBadParams, r.Error.Code)
			require.Equal(t, "msg.send: invalid params: a string holds a lone UTF-16 surrogate (\\ud800..\\udfff "+
				"without its pair), which is no Unicode text", r.Error.Message)
		}
		require.Len(t, inbox(), before, "nothing was recorded")
		require.Equal(t, uint64(5), requestCountsOf(f.srv)[[2]string{"msg.send", string(wire.CodeBadParams)}]-refused,
			"each refusal is counted")

		w.sendLine(`{"id":"p1","method":"msg.send","params":{"to":"Q","body":"\ud83d\ude00","commandId":"c\ud83d\ude00"}}`)
		require.Nil(t, answerTo(t, w, "p1").Error)
		got := inbox()
		require.Len(t, got, before+1)
		require.Equal(t, `"😀"`, got[before].(map[string]any)["body"])
	})
}

// answerTo reads c's frames until the answer to request id.
func answerTo(t *testing.T, c *client, id string) wire.Response {
	t.Helper()
	for {
		f, err := c.read()
		require.NoError(t, err, "waiting for the answer to %s", id)
		var r wire.Response
		if json.Unmarshal(f, &r) == nil && r.ID == id {
			return r
		}
	}
}
