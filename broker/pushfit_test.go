package broker

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/events"
)

// TestEventWhoseEnvelopeOutgrowsTheFrame: with the smallest frame, an event whose fields besides its data take more
// than a frame (a commandId of 256 '<', 1,536 bytes as JSON, shown to the orchestrator) is still delivered at its
// seq, bare — omitted, with the strings the log took from clients left out — to a subscription, which goes on with
// the next event, and to events.since, rather than ending the subscription with a resync that a client replaying
// from it would meet again at once. No frame is over the cap.
func TestEventWhoseEnvelopeOutgrowsTheFrame(t *testing.T) {
	f := newFixture(t, fixtureOpts{opts: Options{MaxFrame: wire.MaxFrameFloor}})
	s := f.seed()
	o := f.dial()
	o.hello(runR, events.OrchestratorKey, s.orch)
	sub := f.dial()
	sub.hello(runR, events.OrchestratorKey, s.orch)
	sub.ok("events.subscribe", map[string]any{})

	longID := strings.Repeat("<", maxCommandID)
	o.okUnescaped("msg.send", map[string]any{"to": taskP, "body": "big", "commandId": longID})
	o.ok("msg.send", map[string]any{"to": taskP, "body": "after"})

	type pushed struct {
		Type     string          `json:"type"`
		RunID    string          `json:"runId"`
		Data     json.RawMessage `json:"data"`
		Metadata map[string]any  `json:"metadata"`
	}
	var got []pushed
	for {
		fr := sub.nextFrame()
		require.LessOrEqual(t, len(fr)+1, wire.MaxFrameFloor, "a frame over the cap: %s", fr)
		var ev wire.Event
		require.NoError(t, json.Unmarshal(fr, &ev))
		require.Equal(t, wire.EventTeamEvent, ev.Name, "%s", fr)
		var te pushed
		require.NoError(t, json.Unmarshal(ev.Data, &te))
		require.EqualValues(t, len(got)+1, ev.Seq, "seqs arrive in order, none skipped")
		got = append(got, te)
		if te.Type == events.TypeMailboxAppended && strings.Contains(string(te.Data), "after") {
			break
		}
	}
	bare := got[len(got)-2]
	require.Equal(t, events.TypeMailboxAppended, bare.Type)
	require.Equal(t, runR, bare.RunID)
	require.JSONEq(t, `null`, string(bare.Data))
	require.Equal(t, true, bare.Metadata["omitted"])
	require.NotContains(t, bare.Metadata, "commandId")
	require.NotContains(t, got[len(got)-1].Metadata, "omitted")

	// events.since answers the same event bare too, and the page goes on past it.
	seq := uint64(len(got) - 1)
	res := o.ok("events.since", map[string]any{"sinceSeq": seq - 1})
	evs := res["events"].([]any)
	require.NotEmpty(t, evs)
	first := evs[0].(map[string]any)
	require.Equal(t, true, first["metadata"].(map[string]any)["omitted"])
	require.NotContains(t, first["metadata"], "commandId")
	require.EqualValues(t, seq, first["metadata"].(map[string]any)["seq"])
}

// TestFitEventRenditions: fitEvent keeps as much of an event as fits — whole, its data omitted, bare (the strings
// the log took from clients left out), bare of its run's id — and even an event whose every id is 256 bytes of
// characters JSON escapes in six fits in a push of the smallest frame.
func TestFitEventRenditions(t *testing.T) {
	long := strings.Repeat("<", 256)
	te := teamEvent{Time: "2026-11-30T12:00:00.002Z", Type: events.TypeForeignImported, RunID: long, TaskID: long,
		Message: long, Data: json.RawMessage(`{"body":"` + strings.Repeat("x", 4000) + `"}`),
		Metadata: teamMetadata{Seq: 1<<64 - 1, Provenance: "api", Position: 1<<64 - 1, SchemaVersion: 1<<16 - 1,
			CommandID: long, CausationID: long, CorrelationID: long,
			Actor:    events.Actor{Role: events.RoleOrchestrator, TaskID: long},
			Imported: &importedMeta{Type: events.TypeForeignImported, Source: long, Seq: -1}}}
	te.Type = long // an imported event shows the source's type
	for _, tc := range []struct {
		name string
		room int
		want teamEvent
	}{
		{"whole", 1 << 20, te},
		{"data omitted", 16 << 10, te.omitData()},
		{"bare", 2 << 10, te.bare()},
		{"bare of its run", wire.MaxFrameFloor - pushEnvelope, te.bareOfRun()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := fitEvent(te, tc.room)
			require.NoError(t, err)
			require.LessOrEqual(t, len(b)+1, tc.room)
			want, err := tc.want.encodeJSON()
			require.NoError(t, err)
			require.Equal(t, string(want), string(b))
		})
	}
	bare := te.bareOfRun()
	require.Equal(t, events.TypeForeignImported, bare.Type, "bare shows the stored type")
	require.Equal(t, teamEvent{Time: te.Time, Type: events.TypeForeignImported, Data: json.RawMessage(`null`),
		Metadata: teamMetadata{Seq: te.Metadata.Seq, Provenance: "api", Position: te.Metadata.Position,
			SchemaVersion: te.Metadata.SchemaVersion, Actor: events.Actor{Role: events.RoleOrchestrator}, Omitted: true}},
		bare)

	b, err := fitEvent(te, 100)
	require.NoError(t, err)
	want, err := bare.encodeJSON()
	require.NoError(t, err)
	require.Equal(t, string(want), string(b), "when nothing fits, the smallest rendition")
	require.Greater(t, len(b)+1, 100, "which does not fit")
}

// TestPushEnvelopeHoldsTheLongest: a team.event push takes at most pushEnvelope bytes besides its data.
func TestPushEnvelopeHoldsTheLongest(t *testing.T) {
	f, err := wire.AppendFrame(nil, wire.Event{Name: wire.EventTeamEvent, Data: json.RawMessage(`0`), Seq: 1<<64 - 1},
		wire.MaxFrameCeiling)
	require.NoError(t, err)
	require.LessOrEqual(t, len(f)-1, pushEnvelope, "%s", f)
}

// TestRequestIDTooLongToAnswer: in the smallest frame, a request whose id the answer writes in more than the frame
// holds (250 U+2028, 750 bytes as sent, six bytes each as JSON) cannot be answered, not even by an error: the
// connection ends with ONE protocol error of id "" saying so, rather than leaving the request unanswered (its
// answer was an empty frame: nothing was written). An id as long of '<', which answers write as sent, is answered.
func TestRequestIDTooLongToAnswer(t *testing.T) {
	f := newFixture(t, fixtureOpts{opts: Options{MaxFrame: wire.MaxFrameFloor}})
	s := f.seed()
	for _, tc := range []struct {
		name, method string
		params       any
	}{
		{"ping", wire.MethodPing, nil},
		{"a wait's answer", "task.waitStatus", map[string]any{"taskId": taskP, "until": "running"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := f.dialAs(t)
			o.hello(runR, events.OrchestratorKey, s.orch)
			o.idPrefix = strings.Repeat("<", 250)
			o.ok(tc.method, tc.params) // '<' is written as sent

			o.idPrefix = strings.Repeat("\u2028", 250)
			r := o.untilErrorAfter(tc.method, tc.params)
			require.Equal(t, "", r.ID)
			require.Equal(t, wire.CodeProtocol, r.Error.Code, r.Error.Message)
			o.closed()
		})
	}
}

// untilErrorAfter sends a request of id c.idPrefix, U+2028 and U+2029 unescaped in it, and returns the next error
// frame.
func (c *client) untilErrorAfter(method string, params any) wire.Response {
	c.t.Helper()
	c.sendUnescapedID(c.idPrefix, method, params)
	return c.untilError()
}

// callUnescapedID sends a request of id, U+2028 and U+2029 unescaped in it (as its params are marshalled), and
// returns its answer, keeping the frames before it in pending.
func (c *client) callUnescapedID(id, method string, params any) wire.Response {
	c.t.Helper()
	c.sendUnescapedID(id, method, params)
	for {
		f, err := c.read()
		require.NoError(c.t, err, "waiting for the answer to %s", method)
		var r wire.Response
		require.NoError(c.t, json.Unmarshal(f, &r))
		if r.ID == id {
			return r
		}
		c.pending = append(c.pending, f)
	}
}

func (c *client) sendUnescapedID(id, method string, params any) {
	c.t.Helper()
	c.n++
	b, err := json.Marshal(map[string]any{"id": "", "method": method, "params": params})
	require.NoError(c.t, err)
	c.sendLine(strings.Replace(string(b), `"id":""`, `"id":"`+id+`"`, 1))
}

// TestCommandWhoseAnswerCannotFitIsNotRecorded: in the smallest frame, a run.create whose answer (the orchestrator's
// token beside the request's id, U+2028s the answer writes in six bytes each) would be one byte over the frame is
// refused oversize-frame before anything is recorded — before, the run was created and its token lost with the
// answer — and the same commandId sent with an id one byte shorter creates the run, whose token opens its
// orchestrator's connection.
func TestCommandWhoseAnswerCannotFitIsNotRecorded(t *testing.T) {
	f := newFixture(t, fixtureOpts{opts: Options{MaxFrame: wire.MaxFrameFloor}})
	a := f.dial()
	a.helloAdmin()
	create := func(run, commandID string) map[string]any {
		return map[string]any{"runId": run, "team": "t", "goal": "g", "cwd": "/w", "commandId": commandID}
	}
	// An answer of the same size, to measure: run ids of the same length, tokens of one length.
	sized := a.call("run.create", create("R8", "k0"))
	require.Nil(t, sized.Error)
	const seps = 150
	written := wire.MaxFrameFloor + 1 - len(`{"id":"","result":}`+"\n") - len(sized.Result) // the id's bytes in the answer
	id := strings.Repeat("\u2028", seps) + strings.Repeat("i", written-6*seps)

	r := a.callUnescapedID(id, "run.create", create("R9", "k1"))
	require.NotNil(t, r.Error, "the answer would be one byte over the frame")
	require.Equal(t, wire.CodeOversizeFrame, r.Error.Code, r.Error.Message)
	a.fails("query.run", map[string]any{"runId": "R9"}, wire.CodeNoManifest)

	r = a.callUnescapedID(id[:len(id)-1], "run.create", create("R9", "k1"))
	require.Nil(t, r.Error, "an answer of exactly the frame")
	var res map[string]any
	require.NoError(t, json.Unmarshal(r.Result, &res))
	o := f.dial()
	o.hello("R9", events.OrchestratorKey, res["orchestratorToken"].(string))
	o.ok("run.transition", map[string]any{"to": "running"})
}
