package broker

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/commands"
)

// TestMessageBodyPastItsBoundIsOversizeFrame: a msg.send, escalate or steer.push body longer than pi-crew's 262,144
// chars is refused oversize-frame, the code pi-crew's broker answers for its body checks (D§7.5, D§7.6), and the
// connection stays. A frame of the default size cannot carry such a body; one of a larger MaxFrame (up to 1 MiB) can.
// A body at the bound is taken (a steer's sanitiser refuses it bad-params).
func TestMessageBodyPastItsBoundIsOversizeFrame(t *testing.T) {
	f := newFixture(t, fixtureOpts{opts: Options{MaxFrame: 1 << 20}})
	s := f.seed()
	o := f.dial()
	o.hello(runR, "orchestrator", s.orch)
	p := f.dial()
	p.hello(runR, taskP, s.p)
	// msg.send stores its body as its JSON text: a string of n chars takes n+2.
	atBound := strings.Repeat("x", commands.MaxBodyChars-2)
	past := strings.Repeat("x", commands.MaxBodyChars-1)
	tests := []struct {
		name   string
		c      *client
		method string
		params map[string]any
		want   wire.Code // "" for a result
	}{
		{"msg.send at the bound", o, "msg.send", map[string]any{"to": taskP, "body": atBound}, ""},
		{"msg.send past it", o, "msg.send", map[string]any{"to": taskP, "body": past}, wire.CodeOversizeFrame},
		{"msg.send of a worker past it", p, "msg.send", map[string]any{"to": "parent", "body": past},
			wire.CodeOversizeFrame},
		{"escalate at the bound", p, "escalate", map[string]any{"body": strings.Repeat("x", commands.MaxBodyChars)}, ""},
		{"escalate past it", p, "escalate", map[string]any{"body": past + "xx"}, wire.CodeOversizeFrame},
		// steer.push's sanitiser keeps a steer to 4096 chars (bad-params); past pi-crew's body bound it is
		// oversize-frame, as pi-crew answers before its sanitiser.
		{"steer.push at the bound", o, "steer.push",
			map[string]any{"taskId": taskP, "body": strings.Repeat("x", commands.MaxBodyChars)}, wire.CodeBadParams},
		{"steer.push past it", o, "steer.push", map[string]any{"taskId": taskP, "body": past + "xx"}, wire.CodeOversizeFrame},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want == "" {
				tc.c.ok(tc.method, tc.params)
				return
			}
			e := tc.c.fails(tc.method, tc.params, tc.want)
			if tc.want == wire.CodeOversizeFrame {
				require.Equal(t, tc.method+": body too large", e.Message)
			}
			tc.c.ok("ping", nil)
		})
	}
}

// TestInboxCursorIsAStringifiedOffset: msg.inbox's cursor is a stringified offset (D§7.5), the decimal ordinal of
// the next message of the caller's mailbox, so a client may pass "0" or an offset it counted itself as well as the
// nextCursor it was given. (crewlog counts the offset in the mailbox, acknowledged messages included, so a cursor
// stays valid while messages before it are acknowledged.) A cursor that is no offset is bad-params.
func TestInboxCursorIsAStringifiedOffset(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	s := f.seed()
	o := f.dial()
	o.hello(runR, "orchestrator", s.orch)
	p := f.dial()
	p.hello(runR, taskP, s.p)
	const sent = 12
	for i := range sent {
		o.ok("msg.send", map[string]any{"to": taskP, "body": fmt.Sprintf("m%02d", i)})
	}
	first := p.ok("msg.inbox", map[string]any{"limit": 10})
	require.Equal(t, "10", first["nextCursor"])
	require.Equal(t, true, first["hasMore"])

	tests := []struct {
		cursor    string
		limit     int
		want      []string // the bodies of the page
		next      string   // "" on the last page
		wantError bool
	}{
		{cursor: "0", limit: 2, want: []string{`"m00"`, `"m01"`}, next: "2"},
		{cursor: "10", limit: 10, want: []string{`"m10"`, `"m11"`}},
		{cursor: "9", limit: 1, want: []string{`"m09"`}, next: "10"},
		{cursor: "12", limit: 5, want: nil},
		{cursor: "13", limit: 5, want: nil},         // past the end: an empty page, as pi-crew slices its list
		{cursor: "4294967295", limit: 5, want: nil}, // the largest offset
		{cursor: "4294967296", limit: 5, wantError: true},
		{cursor: "zz", limit: 5, wantError: true},
		{cursor: "-1", limit: 5, wantError: true},
	}
	for _, tc := range tests {
		t.Run(tc.cursor, func(t *testing.T) {
			params := map[string]any{"cursor": tc.cursor, "limit": tc.limit}
			if tc.wantError {
				p.fails("msg.inbox", params, wire.CodeBadParams)
				return
			}
			res := p.ok("msg.inbox", params)
			var bodies []string
			for _, m := range res["messages"].([]any) {
				bodies = append(bodies, m.(map[string]any)["body"].(string))
			}
			require.Equal(t, tc.want, bodies)
			next, _ := res["nextCursor"].(string)
			require.Equal(t, tc.next, next)
			require.Equal(t, tc.next != "", res["hasMore"])
			require.EqualValues(t, sent, res["total"])
		})
	}
}

// TestDelegateEventMessageCutsTheData: a delegate event's message is pi-crew's recordDelegateEvent text, the type,
// ": " and the JSON of its data cut to 200 UTF-16 units (D§3.1, D§3.5): the cut is the data's, not the whole
// message's, so a delegate.admitted, whose data is long, keeps the first 200 units of it after its type.
func TestDelegateEventMessageCutsTheData(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	s := f.seed()
	p := f.dial()
	p.hello(runR, taskP, s.p)
	p.ok("delegate.request", map[string]any{"prompt": strings.Repeat("find it ", 40), "description": "search"})
	r := p.call("events.since", map[string]any{"sinceSeq": 0})
	require.Nil(t, r.Error)
	var page struct {
		Events []struct {
			Type    string          `json:"type"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		} `json:"events"`
	}
	require.NoError(t, json.Unmarshal(r.Result, &page))
	seen := 0
	for _, ev := range page.Events {
		if !strings.HasPrefix(ev.Type, "delegate.") {
			continue
		}
		seen++
		want := string(ev.Data)
		if len(want) > 200 { // ASCII here: a byte is a UTF-16 unit
			want = want[:200]
		}
		require.Equal(t, ev.Type+": "+want, ev.Message, ev.Type)
	}
	require.Equal(t, 2, seen) // requested, admitted
}
