package wire

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// The golden strings are the frames pi-crew's JSON.stringify produces for the same values (D§7.3, D§7.4, D§7.7)
// and SPEC §5's resync frame, newline included.
func TestFrameShapes(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    any
		want string
	}{
		{"request", Request{ID: "1", Method: MethodPing, Params: json.RawMessage(`{}`)},
			`{"id":"1","method":"ping","params":{}}`},
		{"request without params sends null", Request{ID: "a-1", Method: MethodMsgInbox},
			`{"id":"a-1","method":"msg.inbox","params":null}`},
		{"hello request", Request{ID: "1", Method: MethodHello, Params: mustJSON(t,
			Hello{Protocol: ProtocolVersion, RunID: "run-1", TaskID: "task-1", Token: "tok"})},
			`{"id":"1","method":"hello","params":{"protocol":1,"runId":"run-1","taskId":"task-1","token":"tok"}}`},
		{"result", Response{ID: "7", Result: json.RawMessage(`{"pong":true,"protocol":1}`)},
			`{"id":"7","result":{"pong":true,"protocol":1}}`},
		{"result null", Response{ID: "7"}, `{"id":"7","result":null}`},
		{"hello ack", Response{ID: "1", Result: mustJSON(t,
			HelloAck{Protocol: ProtocolVersion, Session: "s", Run: "run-1", OK: true})},
			`{"id":"1","result":{"protocol":1,"session":"s","run":"run-1","ok":true}}`},
		{"error", Response{ID: "9", Error: NewError(CodePolicyDenied, "depth <4> & more")},
			`{"id":"9","error":{"code":"policy-denied","message":"depth <4> & more"}}`},
		{"error wins over result", Response{ID: "9", Result: json.RawMessage(`1`), Error: NewError(CodeBusy, "")},
			`{"id":"9","error":{"code":"busy","message":"busy, retry later"}}`},
		{"not implemented", Response{ID: "3", Error: NotImplemented("x.y")},
			`{"id":"3","error":{"code":"not-implemented","message":"method 'x.y' is not implemented"}}`},
		{"mailbox push", Event{Name: EventMailboxMessage, Data: json.RawMessage(`{"id":"m1","body":"hi"}`)},
			`{"event":"mailbox.message","data":{"id":"m1","body":"hi"},"seq":0}`},
		{"team event push", Event{Name: EventTeamEvent, Data: json.RawMessage(`{"type":"task.started"}`), Seq: 42},
			`{"event":"team.event","data":{"type":"task.started"},"seq":42}`},
		{"resync", Resync{FromSeq: 1001}, `{"event":"resync","data":{"fromSeq":1001}}`},
		{"raw message is compacted onto one line", Event{Name: EventTeamEvent, Data: json.RawMessage("{\n \"a\": 1\n}")},
			`{"event":"team.event","data":{"a":1},"seq":0}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			frame, err := AppendFrame(nil, tc.v, 0)
			require.NoError(t, err)
			require.Equal(t, tc.want+"\n", string(frame))
		})
	}
}

func TestResponseDecode(t *testing.T) {
	for _, tc := range []struct {
		name  string
		frame string
		want  Response
		err   bool
	}{
		{"result", `{"id":"1","result":{"ok":true}}`, Response{ID: "1", Result: json.RawMessage(`{"ok":true}`)}, false},
		{"result null", `{"id":"1","result":null}`, Response{ID: "1", Result: json.RawMessage(`null`)}, false},
		{"error", `{"id":"2","error":{"code":"auth","message":"hello rejected"}}`,
			Response{ID: "2", Error: &Error{Code: CodeAuth, Message: MsgHelloRejected}}, false},
		{"error null means result", `{"id":"2","error":null,"result":3}`,
			Response{ID: "2", Result: json.RawMessage(`3`)}, false},
		{"neither", `{"id":"1"}`, Response{}, true},
		{"id not a string", `{"id":1,"result":1}`, Response{}, true},
		{"error not an object", `{"id":"1","error":"x"}`, Response{}, true},
		{"not an object", `[1]`, Response{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got Response
			err := json.Unmarshal([]byte(tc.frame), &got)
			if tc.err {
				require.ErrorIs(t, err, ErrMalformed)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestEventDecode(t *testing.T) {
	var ev Event
	require.NoError(t, json.Unmarshal([]byte(`{"event":"team.event","data":{"a":1},"seq":5}`), &ev))
	require.Equal(t, Event{Name: EventTeamEvent, Data: json.RawMessage(`{"a":1}`), Seq: 5}, ev)

	// A client that decodes every push as an Event sees a resync frame as one too.
	require.NoError(t, json.Unmarshal([]byte(`{"event":"resync","data":{"fromSeq":9}}`), &ev))
	require.Equal(t, EventResync, ev.Name)
	var rs Resync
	require.NoError(t, json.Unmarshal([]byte(`{"event":"resync","data":{"fromSeq":9}}`), &rs))
	require.Equal(t, Resync{FromSeq: 9}, rs)
	require.ErrorIs(t, json.Unmarshal([]byte(`{"event":"team.event","data":{}}`), &rs), ErrMalformed)
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}
