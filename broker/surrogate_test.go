package broker

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// A lone UTF-16 surrogate escape (\ud800 without its pair; JavaScript's JSON.stringify writes one for a string cut
// between the two halves of an emoji) decodes to U+FFFD, so two strings that differ only there are one. A request id
// holding one closes the connection, as an invalid request does (the id cannot be echoed: the client waits on the one
// it sent), and a commandId holding one is refused bad-params, before anything is decided or recorded (two ids its
// client holds apart were one, the second answered the first's outcome or refused as a reuse). Elsewhere the text is
// taken with U+FFFD in its place, as pi-crew's runtime cuts texts between the halves of a pair (a refused settlement
// would lose a grandchild's result); a pair is text, and reads back as the character it spells.
func TestLoneSurrogate(t *testing.T) {
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

		for _, tc := range []struct{ id, params string }{
			{"c1", `{"to":"Q","body":"one","commandId":"c\ud800"}`},
			{"c2", `{"to":"Q","body":"two","commandId":"c\udbff"}`},
			{"c3", `{"to":"Q","body":"three","commandId":"\udc00"}`},
		} {
			w.sendLine(`{"id":"` + tc.id + `","method":"msg.send","params":` + tc.params + `}`)
			r := answerTo(t, w, tc.id)
			require.NotNil(t, r.Error, "%s: %s", tc.params, r.Result)
			require.Equal(t, wire.CodeBadParams, r.Error.Code)
			require.Equal(t, "msg.send: invalid params: commandId holds a lone UTF-16 surrogate (\\ud800..\\udfff "+
				"without its pair), which is no Unicode text", r.Error.Message)
		}
		require.Len(t, inbox(), before, "nothing was recorded")
		require.Equal(t, uint64(3), requestCountsOf(f.srv)[[2]string{"msg.send", string(wire.CodeBadParams)}]-refused,
			"each refusal is counted")

		w.sendLine(`{"id":"b1","method":"msg.send","params":{"to":"Q","body":"cut \ud83d","commandId":"b1"}}`)
		require.Nil(t, answerTo(t, w, "b1").Error, "a text cut between the halves of a pair is taken")
		w.sendLine(`{"id":"p1","method":"msg.send","params":{"to":"Q","body":"\ud83d\ude00","commandId":"c\ud83d\ude00"}}`)
		require.Nil(t, answerTo(t, w, "p1").Error)
		got := inbox()
		require.Len(t, got, before+2)
		require.Equal(t, "\"cut \ufffd\"", got[before].(map[string]any)["body"])
		require.Equal(t, `"😀"`, got[before+1].(map[string]any)["body"])
	})
}

// An import.append write's commandId holding a lone surrogate is refused as a command's is, the whole call
// (bad-params, as any write of the wrong shape), before anything is recorded: decoded, "import:r\ud800" and
// "import:r\udc00" were one id of the engine's, the second write answered replayed with the first's outcome, or
// refused as a reuse, and not imported.
func TestImportAppendRefusesALoneSurrogateInACommandID(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	a := f.dialAs(t)
	a.helloAdmin()
	const run = "team_20261201120000_0000000000000002"
	write := func(id string) string {
		return `{"commandId":"` + id + `","runId":"` + run + `","events":[{"type":"run.created","time":1790928000000,` +
			`"payload":{"team":"core","goal":"g","cwd":"/srv"}}]}`
	}
	for _, tc := range []struct{ name, writes string }{
		{"one write", `[` + write(`import:r\ud800`) + `]`},
		{"two ids one decoded", `[` + write(`import:r\udc00`) + `,` + write(`import:r\udbff`) + `]`},
		{"after a good write", `[` + write(`import:r`) + `,` + write(`import:\ud83d`) + `]`},
	} {
		a.sendLine(`{"id":"i","method":"import.append","params":{"source":"picrew","writes":` + tc.writes + `}}`)
		r := answerTo(t, a, "i")
		require.NotNil(t, r.Error, "%s: %s", tc.name, r.Result)
		require.Equal(t, wire.CodeBadParams, r.Error.Code, tc.name)
		require.Contains(t, r.Error.Message, "commandId holds a lone UTF-16 surrogate", tc.name)
		_, err := f.log.Outcome(events.EnginePrincipal().Key(), "import:r\ufffd")
		require.ErrorIs(t, err, eventlog.ErrNotFound, "%s: nothing was recorded", tc.name)
		_, err = f.log.Outcome(events.EnginePrincipal().Key(), "import:r")
		require.ErrorIs(t, err, eventlog.ErrNotFound, "%s: nothing was recorded", tc.name)
	}
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
