package broker

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
)

// TestAMessageNoInboxCanReadIsRefused: a message is read back as JSON, where a char can take more bytes than it
// took in the request that sent it (a quote of a JSON body is stored escaped and escaped again as it is read, a
// '<' sent as it is is read as six bytes). A worker whose message could not be answered in a frame of its own
// would leave its recipient's msg.inbox answering oversize-frame at that message for good, so that the message, and
// every message after it, is never read: worker P could so blind the orchestrator to the run inbox, where Q's
// "done" follows. Such a message is refused as too large when it is sent, and the recipient reads on.
func TestAMessageNoInboxCanReadIsRefused(t *testing.T) {
	// Each body fits in a request of the default frame and within the body bound, and not in a page of its own.
	quotes := strings.Repeat(`"`, 100_000)
	angles := strings.Repeat("<", 50_000)
	tests := []struct {
		name, method string
		frame        int
		params       map[string]any
		escaped      bool // sent as an encoder escaping HTML sends it, or with '<' as it is
	}{
		{name: "msg.send to parent", method: "msg.send", params: map[string]any{"to": "parent", "body": quotes},
			escaped: true},
		{name: "msg.send to group", method: "msg.send", params: map[string]any{"to": "group", "body": angles}},
		{name: "escalate to parent", method: "escalate", params: map[string]any{"to": "parent", "body": angles}},
		// A subject (at most 256 chars) takes a message past a small frame only.
		{name: "msg.send with a subject", method: "msg.send", frame: 2048,
			params: map[string]any{"to": []any{"parent"}, "body": strings.Repeat("x", 300),
				"subject": strings.Repeat("<", 256)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{opts: Options{MaxFrame: tc.frame}})
			s := f.seed()
			o, p, q := f.dial(), f.dial(), f.dial()
			o.hello(runR, events.OrchestratorKey, s.orch)
			p.hello(runR, taskP, s.p)
			q.hello(runR, taskQ, s.q)

			send := p.callUnescaped
			if tc.escaped {
				send = p.call
			}
			r := send(tc.method, tc.params)
			require.NotNil(t, r.Error, "%s: a message no inbox can answer was accepted", tc.method)
			require.Equal(t, wire.CodeOversizeFrame, r.Error.Code, r.Error.Message)
			require.Equal(t, tc.method+": body too large", r.Error.Message)

			q.ok("msg.send", map[string]any{"to": "parent", "body": "done"})
			o.ok("msg.send", map[string]any{"to": []any{taskP, taskQ}, "body": "done"})
			for _, reader := range []*client{o, p, q} {
				require.Contains(t, inboxBodies(reader), `"done"`)
			}
		})
	}
}

// TestAMessageTheEngineRefusesIsLeftToIt: a worker's message the engine refuses for its params (a kind or a
// priority it does not take, a questionId without kind response, "group" naming more tasks than a message may
// reach) is answered as the engine answers it, bad-params, however wide its body: "body too large" would tell the
// worker to cut a body the engine would refuse at any length.
func TestAMessageTheEngineRefusesIsLeftToIt(t *testing.T) {
	angles := strings.Repeat("<", 50_000)
	tests := []struct {
		name, method string
		params       map[string]any
		manyTasks    bool // the run has more tasks than commands.MaxRecipients besides the sender
		message      string
	}{
		{name: "msg.send of a kind a worker may not send", method: "msg.send",
			params:  map[string]any{"to": "parent", "kind": "steer", "body": angles},
			message: "msg.send: worker kind must be 'notify' or 'message'"},
		{name: "msg.send of a priority that is none", method: "msg.send",
			params:  map[string]any{"to": "parent", "priority": "bogus", "body": angles},
			message: "msg.send: priority must be urgent, normal or low"},
		{name: "msg.send of a questionId without kind response", method: "msg.send",
			params:  map[string]any{"to": "parent", "questionId": "q1", "body": angles},
			message: "msg.send: questionId goes with kind 'response' only"},
		{name: "msg.send to a group past the recipients' bound", method: "msg.send", manyTasks: true,
			params:  map[string]any{"to": "group", "body": angles},
			message: "msg.send: recipient count out of range"},
		{name: "escalate of a priority that is none", method: "escalate",
			params:  map[string]any{"to": "parent", "priority": "bogus", "body": angles},
			message: "escalate: priority must be urgent, normal or low"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{})
			s := f.seed()
			p := f.dial()
			if tc.manyTasks {
				o := f.dial()
				o.hello(runR, events.OrchestratorKey, s.orch)
				for i := range commands.MaxRecipients {
					id := fmt.Sprintf("t%02d", i)
					o.ok("task.create", map[string]any{"taskId": id, "role": "executor", "agent": "a", "title": id,
						"cwd": "/w/" + id})
				}
			}
			p.hello(runR, taskP, s.p)

			r := p.callUnescaped(tc.method, tc.params)
			require.NotNil(t, r.Error, "%s: accepted", tc.method)
			require.Equal(t, wire.CodeBadParams, r.Error.Code, r.Error.Message)
			require.Equal(t, tc.message, r.Error.Message)
		})
	}
}

// inboxBodies reads c's whole inbox, page after page as a client follows nextCursor, and returns the bodies.
func inboxBodies(c *client) []string {
	c.t.Helper()
	var bodies []string
	params, seen := map[string]any{}, cursorsSeen{}
	for {
		res := c.ok("msg.inbox", params)
		for _, m := range res["messages"].([]any) {
			bodies = append(bodies, m.(map[string]any)["body"].(string))
		}
		next, _ := res["nextCursor"].(string)
		if next == "" {
			return bodies
		}
		seen.follow(c.t, next, "msg.inbox")
		params["cursor"] = next
	}
}

// TestTheWidestMessageSentIsRead: the bound is the page's. Every message a worker had accepted on the way to the
// widest one (escaped twice over, acknowledged, with a page after it, its every copy) is read back by msg.inbox and
// query.mailbox answering a request id of readerIDLen bytes, and a quote more than the widest is refused.
func TestTheWidestMessageSentIsRead(t *testing.T) {
	for _, frame := range []int{wire.MaxFrameFloor, 4096, wire.DefaultMaxFrame} {
		t.Run(fmt.Sprint(frame), func(t *testing.T) {
			f := newFixture(t, fixtureOpts{opts: Options{MaxFrame: frame}})
			s := f.seed()
			o, p, q := f.dial(), f.dial(), f.dial()
			o.hello(runR, events.OrchestratorKey, s.orch)
			p.hello(runR, taskP, s.p)
			q.hello(runR, taskQ, s.q)
			// Each message goes to Q and to a task whose longer id makes its copy the wider.
			long := strings.Repeat("L", 100)
			o.ok("task.create", map[string]any{"taskId": long, "role": "executor", "agent": "a", "title": "l",
				"cwd": "/w/l"})
			to := []any{taskQ, long}
			sends := func(n int) bool {
				return p.call("msg.send", map[string]any{"to": to, "body": strings.Repeat(`"`, n)}).Error == nil
			}
			lo, hi := 0, (frame-300)/2 // sends(lo) (none sent) and !sends(hi), whose request still fits in a frame
			for hi-lo > 1 {
				if mid := (lo + hi) / 2; sends(mid) {
					lo = mid
				} else {
					hi = mid
				}
			}
			require.Positive(t, lo, "no message is accepted")
			require.False(t, sends(lo+1))
			p.ok("msg.send", map[string]any{"to": to, "body": "last"})
			widest := `"` + strings.Repeat(`\"`, lo) + `"`

			// Read queued, then acknowledged: by the recipient's msg.inbox for Q, by query.mailbox for the other.
			ids := map[string][]any{}
			for _, m := range widestIDPages(q, "msg.inbox", map[string]any{"limit": 1}) {
				ids[taskQ] = append(ids[taskQ], m["id"])
			}
			for _, m := range widestIDPages(o, "query.mailbox", map[string]any{"taskId": long, "limit": 1}) {
				ids[long] = append(ids[long], m["id"])
			}
			q.ok("mailbox.ack", map[string]any{"messageIds": ids[taskQ]})
			o.ok("mailbox.ack", map[string]any{"taskId": long, "messageIds": ids[long]})
			for _, box := range []string{taskQ, long} {
				var bodies []any
				for _, m := range widestIDPages(o, "query.mailbox", map[string]any{"taskId": box, "limit": 1}) {
					require.Equal(t, "acknowledged", m["status"])
					bodies = append(bodies, m["body"])
				}
				require.Contains(t, bodies, widest)
				require.Len(t, bodies, len(ids[box]))
			}
		})
	}
}

// widestIDPages reads every page of method, one request after another with an id of readerIDLen bytes, and
// returns the messages.
func widestIDPages(c *client, method string, params map[string]any) []map[string]any {
	c.t.Helper()
	var out []map[string]any
	seen := cursorsSeen{}
	for {
		c.idPrefix = strings.Repeat("x", readerIDLen-len(fmt.Sprintf("c%d", c.n+1)))
		res := c.ok(method, params)
		for _, m := range res["messages"].([]any) {
			out = append(out, m.(map[string]any))
		}
		next, _ := res["nextCursor"].(string)
		if next == "" {
			c.idPrefix = ""
			return out
		}
		seen.follow(c.t, next, method)
		params["cursor"] = next
	}
}

// TestADelegateResultNoInboxCanReadIsCut: a delegation's result is its grandchild's text, which the runtime passes
// on in delegate.settle (cut to commands.MaxResultChars, as pi-crew cuts it). A grandchild whose text takes six bytes
// a char in JSON ('<', say) left its parent's msg.inbox answering oversize-frame at the result for good, so that the
// parent never read its result or any message after it; rerouted to the run inbox (its parent ended), the
// orchestrator's. The result is cut to what a page of its own holds, and the recipient reads on.
func TestADelegateResultNoInboxCanReadIsCut(t *testing.T) {
	for _, frame := range []int{wire.MaxFrameFloor, 8192, wire.DefaultMaxFrame} {
		for _, parentEnded := range []bool{false, true} {
			t.Run(fmt.Sprint(frame, parentEnded), func(t *testing.T) {
				f := newFixture(t, fixtureOpts{opts: Options{MaxFrame: frame}})
				s := f.seed()
				o, p := f.dial(), f.dial()
				o.hello(runR, events.OrchestratorKey, s.orch)
				p.hello(runR, taskP, s.p)
				sub := p.ok("delegate.request", map[string]any{"prompt": "look", "description": "d",
					"budgetTokens": 10})["grandchildTaskRef"].(string)
				o.ok("delegate.spawned", map[string]any{"subId": sub, "pid": 4242})
				reader := p
				if parentEnded {
					o.ok("task.transition", map[string]any{"taskId": taskP, "to": "completed"})
					reader = o
				}
				text := strings.Repeat("<", min(commands.MaxResultChars, frame-200))
				res := o.result("delegate.settle", o.callUnescaped("delegate.settle",
					map[string]any{"subId": sub, "outcome": "ok", "text": text}))
				require.Equal(t, parentEnded, res["rerouted"])
				o.ok("msg.send", map[string]any{"to": []any{taskQ, "parent"}, "body": "done"})
				if !parentEnded {
					p.ok("escalate", map[string]any{"body": "done"})
				}

				var result string
				var last any
				for _, m := range widestIDPages(reader, "msg.inbox", map[string]any{"limit": 1}) {
					if m["from"] == "delegate:"+sub {
						result = m["body"].(string)
					}
					last = m["body"]
				}
				delivered, ok := strings.CutPrefix(result, "--- delegate "+sub+" (ok) ---\n")
				require.True(t, ok, "the result: %q", result)
				delivered, note, ok := strings.Cut(delivered, "\n--- end delegate "+sub+" ---")
				require.True(t, ok, "its end marker: %q", result)
				require.Equal(t, strings.Repeat("<", len(delivered)), delivered, "a start of the text")
				require.Less(t, len(delivered), len(text), "cut")
				if frame == wire.MaxFrameFloor {
					// NB: in the smallest frame, room for a parent task id of the longest leaves none for the text,
					// nor for the note of the cut.
					require.Empty(t, delivered+note, "cut to nothing")
				} else {
					require.Equal(t, fmt.Sprintf("\n[the result was cut to fit a frame: its text had %d chars]",
						len(text)), note, "the note of the cut")
					require.Greater(t, len(delivered), 2, "cut, not emptied")
				}
				require.Contains(t, []any{"done", `"done"`}, last, "the message after the result")
			})
		}
	}
}

// TestACutResultSaysSo: a settle's text is cut to what an inbox page holds for a parent task id of the longest (and
// without runId a run id of the longest), which in a frame of 1 KiB leaves no room for any text: every result, "done"
// too, was delivered as an empty fence, which its parent read as a grandchild that answered nothing, and nothing in
// the settle's answer, the message or the event that recorded it said that there had been more. The fence of a cut
// result is followed by a note of the length of the text as sent, made room for in the start of the text delivered.
// Where that start was shorter than the note (frames under about 1.6 KiB), the note was added all the same, and the
// message outgrew the page it was cut for: a parent of the longest id read it in msg.inbox without its body
// (textsOmitted), where it read an empty fence before the note. The note is left out where the start leaves it no
// room, and the result is read whole and pushed in every frame, whatever its parent's id.
func TestACutResultSaysSo(t *testing.T) {
	type cutCase struct {
		frame  int
		text   string
		parent string
		noted  bool // the cut leaves the note room
	}
	longest := strings.Repeat("p", commands.MaxIDChars)
	cases := []cutCase{
		{wire.MaxFrameFloor, "done", taskP, false},
		{1500, strings.Repeat("a", 300), taskP, false},
		{4096, strings.Repeat("<", 3800), taskP, true},
		// NB: the note is made room for in the page the text was cut for: the longest parent id reads it whole.
		{4096, strings.Repeat("<", 3800), longest, true},
	}
	for frame := wire.MaxFrameFloor; frame <= 1600; frame += 25 {
		for _, parent := range []string{taskP, longest} {
			if parent == longest && frame < 1099 {
				// NB: a page of a smaller frame holds no result's message to a parent of the longest id, not even an
				// empty fence: it is read without its body, as before the note, and no cut of the text can help.
				continue
			}
			cases = append(cases, cutCase{frame, "done", parent, false},
				cutCase{frame, strings.Repeat("<", frame-300), parent, frame >= 1600})
		}
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.frame, " ", len(tc.parent), " ", len(tc.text)), func(t *testing.T) {
			f := newFixture(t, fixtureOpts{opts: Options{MaxFrame: tc.frame}})
			s := f.seed()
			o, p := f.dial(), f.dial()
			o.hello(runR, events.OrchestratorKey, s.orch)
			token := s.p
			if tc.parent != taskP {
				o.ok("task.create", map[string]any{"taskId": tc.parent, "role": "executor", "agent": "a", "title": "l",
					"cwd": "/w"})
				o.ok("task.transition", map[string]any{"taskId": tc.parent, "to": "running"})
				token = o.ok("credential.issue", map[string]any{"taskId": tc.parent})["token"].(string)
			}
			p.hello(runR, tc.parent, token)
			sub := p.ok("delegate.request", map[string]any{"prompt": "look", "description": "d"})["grandchildTaskRef"].(string)
			o.result("delegate.settle", o.callUnescaped("delegate.settle",
				map[string]any{"subId": sub, "outcome": "ok", "text": tc.text}))
			o.ok("msg.send", map[string]any{"to": []any{tc.parent}, "body": "after"})
			require.True(t, p.pushedBefore("delegate:"+sub, "after"), "the result is pushed to its parent")

			m := resultOf(p, sub)
			require.Nil(t, m["textsOmitted"], "the result is read whole")
			fenced, note, ok := strings.Cut(m["body"].(string), "\n--- end delegate "+sub+" ---")
			require.True(t, ok, "the fence: %q", m["body"])
			delivered, ok := strings.CutPrefix(fenced, "--- delegate "+sub+" (ok) ---\n")
			require.True(t, ok, "the fence: %q", m["body"])
			require.True(t, strings.HasPrefix(tc.text, delivered), "a start of the text: %q", delivered)
			if tc.text != "done" {
				require.Less(t, len(delivered), len(tc.text), "cut")
			}
			want := fmt.Sprintf("\n[the result was cut to fit a frame: its text had %d chars]",
				utf8.RuneCountInString(tc.text))
			switch {
			case note != "" || tc.noted:
				require.Equal(t, want, note, "the note after the fence")
			case delivered != tc.text:
				require.Less(t, jsonTextBytes(delivered), jsonTextBytes(want),
					"the note is left out only for want of room")
			}
		})
	}
}

// pushedBefore reads the mailbox pushes c is sent up to the one whose body holds last, and tells whether one from
// sender came first.
func (c *client) pushedBefore(sender, last string) bool {
	c.t.Helper()
	seen := false
	for {
		var ev struct {
			Name string `json:"event"`
			Data struct {
				From string `json:"from"`
				Body string `json:"body"`
			} `json:"data"`
		}
		require.NoError(c.t, json.Unmarshal(c.nextFrame(), &ev))
		switch {
		case ev.Name != wire.EventMailboxMessage:
		case ev.Data.From == sender:
			seen = true
		case strings.Contains(ev.Data.Body, last):
			return seen
		}
	}
}

// jsonTextBytes is the bytes s takes inside a JSON string.
func jsonTextBytes(s string) int {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return len(b) - 2
}

// TestACutResultsRetryIsTheSameRequest: a settle's text is cut to what an inbox page holds before the engine sees it,
// and the engine tells a retry from another request by what it sees. The admin's settle that leaves out runId found
// the delegation's run (and so its parent, and the cut) through the slot the delegation held, which the settle
// frees: the retry, cut otherwise or not at all, was refused "commandId already used for a different request"
// instead of answered as the first attempt.
func TestACutResultsRetryIsTheSameRequest(t *testing.T) {
	for _, admin := range []bool{false, true} {
		t.Run(fmt.Sprint("admin ", admin), func(t *testing.T) {
			const frame = 4096
			f := newFixture(t, fixtureOpts{opts: Options{MaxFrame: frame}})
			s := f.seed()
			o, p := f.dial(), f.dial()
			o.hello(runR, events.OrchestratorKey, s.orch)
			p.hello(runR, taskP, s.p)
			sub := p.ok("delegate.request", map[string]any{"prompt": "look", "description": "d"})["grandchildTaskRef"].(string)
			settler := o
			if admin {
				settler = f.dial()
				settler.helloAdmin()
			}
			params := map[string]any{"subId": sub, "outcome": "ok", "commandId": "settle-1",
				"text": strings.Repeat("<", frame-200)}
			first := settler.result("delegate.settle", settler.callUnescaped("delegate.settle", params))
			again := settler.result("delegate.settle", settler.callUnescaped("delegate.settle", params))
			require.Equal(t, first, again)
			require.Contains(t, resultBodyOf(p, sub), "--- delegate "+sub+" (ok) ---\n<", "the result, cut, read by its parent")
		})
	}
}

// TestACutResultsRetryIsTheSameRequestWhateverTheRunHoldsThen: the cut of a settle's text must not depend on what
// the run holds when the settle arrives, or a retry is told from the first attempt. A settle of a delegation not
// admitted yet (sent early, or through a crewd whose copy is behind) was left uncut and refused, the refusal
// recorded; once the delegation was admitted its retry was cut, and was refused "commandId already used for a
// different request" instead of answered the recorded refusal.
func TestACutResultsRetryIsTheSameRequestWhateverTheRunHoldsThen(t *testing.T) {
	const frame = 4096
	delegate := func(p *client) string {
		return p.ok("delegate.request", map[string]any{"prompt": "look", "description": "d"})["grandchildTaskRef"].(string)
	}
	probe := newFixture(t, fixtureOpts{opts: Options{MaxFrame: frame}})
	ps := probe.seed()
	pp := probe.dial()
	pp.hello(runR, taskP, ps.p)
	sub := delegate(pp) // the sub id the same steps admit

	f := newFixture(t, fixtureOpts{opts: Options{MaxFrame: frame}})
	s := f.seed()
	o, p := f.dial(), f.dial()
	o.hello(runR, events.OrchestratorKey, s.orch)
	p.hello(runR, taskP, s.p)
	params := map[string]any{"subId": sub, "outcome": "ok", "commandId": "settle-early",
		"text": strings.Repeat("<", frame-200)}
	first := o.callUnescaped("delegate.settle", params)
	require.NotNil(t, first.Error, "no such delegation yet")
	require.Equal(t, sub, delegate(p))
	again := o.callUnescaped("delegate.settle", params)
	require.Equal(t, first.Error, again.Error, "the retry is answered the recorded refusal")
}

// TestACutResultsRetryIsTheSameRequestWhateverTheFrame: a settle's text is cut to what an inbox page of the frame
// holds, and the engine fingerprinted the text as cut: a retry through a crewd restarted with another --max-frame
// (or a node of a cluster with another frame) was cut otherwise, and the retry of an accepted settle was refused
// "commandId already used for a different request" instead of answered the recorded outcome. The result its parent
// reads is the one the first attempt delivered.
func TestACutResultsRetryIsTheSameRequestWhateverTheFrame(t *testing.T) {
	for _, frames := range [][2]int{{4096, 8192}, {8192, 4096}, {4096, wire.MaxFrameFloor}} {
		t.Run(fmt.Sprint(frames[0], " then ", frames[1]), func(t *testing.T) {
			mem := vfs.NewMem()
			f := newFixture(t, fixtureOpts{fs: mem, opts: Options{MaxFrame: frames[0]}})
			s := f.seed()
			o, p := f.dial(), f.dial()
			o.hello(runR, events.OrchestratorKey, s.orch)
			p.hello(runR, taskP, s.p)
			sub := p.ok("delegate.request", map[string]any{"prompt": "look", "description": "d"})["grandchildTaskRef"].(string)
			// NB: a text each frame cuts, which a request of the smaller frame still carries.
			params := map[string]any{"subId": sub, "outcome": "ok", "commandId": "settle-1",
				"text": strings.Repeat("<", min(frames[0], frames[1])-300)}
			first := o.result("delegate.settle", o.callUnescaped("delegate.settle", params))
			delivered := resultBodyOf(p, sub)
			require.Contains(t, delivered, "--- delegate "+sub+" (ok) ---\n<", "the result, cut")
			o.nc.Close()
			p.nc.Close()
			f.close()

			g := newFixture(t, fixtureOpts{fs: mem, opts: Options{MaxFrame: frames[1]}})
			g.clock.Store(f.clock.Load())
			o, p = g.dial(), g.dial()
			o.hello(runR, events.OrchestratorKey, s.orch)
			p.hello(runR, taskP, s.p)
			again := o.callUnescaped("delegate.settle", params)
			require.Nil(t, again.Error, "the retry is answered the recorded outcome")
			require.Equal(t, first, o.result("delegate.settle", again))
			if frames[1] >= frames[0] {
				require.Equal(t, delivered, resultBodyOf(p, sub), "the result the first attempt delivered")
			}
		})
	}
}

// resultBodyOf is the body of the message that delivered delegation sub's result to reader, read a message a page.
func resultBodyOf(reader *client, sub string) string {
	body, _ := resultOf(reader, sub)["body"].(string)
	return body
}

// resultOf is the message that delivered delegation sub's result to reader, read a message a page.
func resultOf(reader *client, sub string) map[string]any {
	var result map[string]any
	for _, m := range widestIDPages(reader, "msg.inbox", map[string]any{"limit": 1}) {
		if m["from"] == "delegate:"+sub {
			result = m
		}
	}
	return result
}

// TestAMessagesRetryIsAnsweredItsOutcomeWhateverTheRunHoldsThen: a worker's message is measured against the
// mailboxes it reaches in the published state before the engine sees it; a retry of one the engine recorded is
// answered that outcome, even when the message would no longer fit a page of a mailbox it reaches now ("group"
// reaches a task created since, whose id is longer). It was answered oversize-frame "body too large", as if the
// message had not been sent.
func TestAMessagesRetryIsAnsweredItsOutcomeWhateverTheRunHoldsThen(t *testing.T) {
	const frame = 4096
	long := strings.Repeat("L", commands.MaxIDChars)
	createLong := func(o *client) {
		o.ok("task.create", map[string]any{"taskId": long, "role": "executor", "agent": "a", "title": "l", "cwd": "/w"})
	}
	// The longest body of '<' that fits a page of box to: found on a probe whose run holds the long task.
	probe := newFixture(t, fixtureOpts{opts: Options{MaxFrame: frame}})
	ps := probe.seed()
	po, pp := probe.dial(), probe.dial()
	po.hello(runR, events.OrchestratorKey, ps.orch)
	pp.hello(runR, taskP, ps.p)
	createLong(po)
	longest := func(to string) int {
		lo, hi := 0, frame // lo fits, hi does not
		for hi-lo > 1 {
			n := (lo + hi) / 2
			if r := pp.callUnescaped("msg.send", map[string]any{"to": []any{to}, "body": strings.Repeat("<", n)}); r.Error == nil {
				lo = n
			} else {
				require.Equal(t, wire.CodeOversizeFrame, r.Error.Code)
				hi = n
			}
		}
		return lo
	}
	n := longest(long) + 1
	require.Less(t, n, longest(taskQ), "a body that fits a page of task Q's mailbox and not of the long task's")

	f := newFixture(t, fixtureOpts{opts: Options{MaxFrame: frame}})
	s := f.seed()
	o, p := f.dial(), f.dial()
	o.hello(runR, events.OrchestratorKey, s.orch)
	p.hello(runR, taskP, s.p)
	params := map[string]any{"to": "group", "body": strings.Repeat("<", n), "commandId": "to-group"}
	first := p.result("msg.send", p.callUnescaped("msg.send", params))
	createLong(o)
	again := p.callUnescaped("msg.send", params)
	require.Nil(t, again.Error, "the retry is answered the recorded outcome")
	require.Equal(t, first, p.result("msg.send", again))
}

// TestMessagesPastIDsTooLargeForAFrame: a message carries its run's id (up to 255 chars) and its recipient's (up to
// 256) three times, as its id's label, its to and its taskId, beside its sender, kind, status and times, all of which
// the run.create, task.create and the orchestrator's msg.send fit in a frame of 1 KiB, which a daemon allows: the
// message read back larger than the frame without its texts too, and msg.inbox and query.mailbox answered
// oversize-frame at it for good, its recipient reading neither it nor any message after it. Such a message is sent
// without its runId, to and taskId too (empty: the run and the mailbox the read names), namesOmitted true, every
// other field as it is.
func TestMessagesPastIDsTooLargeForAFrame(t *testing.T) {
	f, o, runID := longestRunID(t, nil)
	long := strings.Repeat("t", commands.MaxIDChars)
	o.ok("task.create", map[string]any{"taskId": long, "role": "r", "agent": "a", "title": "t", "cwd": "/w"})
	o.ok("task.transition", map[string]any{"taskId": long, "to": "running"})
	var sent []string
	for _, body := range []string{"hi", "again"} {
		sent = append(sent, o.ok("msg.send", map[string]any{"to": long, "body": body})["messageId"].(string))
	}
	p := f.dial()
	p.hello(runID, long, o.ok("credential.issue", map[string]any{"taskId": long})["token"].(string))

	for _, read := range []struct {
		c      *client
		method string
		params map[string]any
	}{{p, "msg.inbox", nil}, {o, "query.mailbox", map[string]any{"taskId": long}}} {
		msgs := everyItem(t, read.c, read.method, read.params, "messages")
		require.LessOrEqual(t, read.c.rd.FrameBytes(), wire.MaxFrameFloor)
		require.Len(t, msgs, 2, "%s lists every message, the one after the first too", read.method)
		for i, m := range msgs {
			require.Equal(t, sent[i]+"_"+long, m["id"], read.method)
			require.Equal(t, true, m["namesOmitted"], "%s: the ids are left out, and it says so", read.method)
			require.Equal(t, "", m["runId"])
			require.Equal(t, "", m["to"])
			require.NotContains(t, m, "taskId")
			require.Equal(t, "orchestrator", m["from"])
			require.NotEmpty(t, m["status"])
			require.Equal(t, true, m["textsOmitted"])
		}
	}
}

// TestMessagesPastReplyIDsTooLargeForAFrame: the orchestrator's msg.send takes a replyTo of up to 256 chars of any
// char and a questionId of up to 128, which its request sends in a frame of 1 KiB: a response to a task of an id of
// 256 in a run of an id of 255, naming a question and the message it answers by ids of that length, or one replying
// to an id of 256 '<' (six bytes each in JSON), read back larger than the frame without its texts, runId, to and
// taskId too, and its recipient's msg.inbox answered oversize-frame at it for good. Such a message is sent without
// its replyTo and questionId too, with its other names (namesOmitted), every other field as it is.
func TestMessagesPastReplyIDsTooLargeForAFrame(t *testing.T) {
	tests := map[string]struct {
		taskID string
		send   map[string]any
	}{
		"a response of ids of the longest": {taskID: strings.Repeat("t", commands.MaxIDChars),
			send: map[string]any{"kind": "response", "questionId": strings.Repeat("q", commands.MaxQuestionIDChars),
				"replyTo": strings.Repeat("m", commands.MaxIDChars)}},
		"a reply to an id JSON writes in six bytes a char": {taskID: "t",
			send: map[string]any{"replyTo": strings.Repeat("<", commands.MaxIDChars)}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f, o, runID := longestRunID(t, nil)
			o.ok("task.create", map[string]any{"taskId": tc.taskID, "role": "r", "agent": "a", "title": "t", "cwd": "/w"})
			o.ok("task.transition", map[string]any{"taskId": tc.taskID, "to": "running"})
			send := map[string]any{"to": tc.taskID, "body": "hi"}
			maps.Copy(send, tc.send)
			sent := []string{o.okUnescaped("msg.send", send)["messageId"].(string),
				o.ok("msg.send", map[string]any{"to": tc.taskID, "body": "again"})["messageId"].(string)}
			p := f.dial()
			p.hello(runID, tc.taskID, o.ok("credential.issue", map[string]any{"taskId": tc.taskID})["token"].(string))

			for _, read := range []struct {
				c      *client
				method string
				params map[string]any
			}{{p, "msg.inbox", nil}, {o, "query.mailbox", map[string]any{"taskId": tc.taskID}}} {
				msgs := everyItem(t, read.c, read.method, read.params, "messages")
				require.LessOrEqual(t, read.c.rd.FrameBytes(), wire.MaxFrameFloor)
				require.Len(t, msgs, 2, "%s lists every message, the one after the first too", read.method)
				require.Equal(t, sent[0]+"_"+tc.taskID, msgs[0]["id"], read.method)
				require.Equal(t, true, msgs[0]["namesOmitted"], "%s: the ids are left out, and it says so", read.method)
				require.NotContains(t, msgs[0], "replyTo", read.method)
				require.NotContains(t, msgs[0], "questionId", read.method)
				require.Equal(t, "orchestrator", msgs[0]["from"])
				if kind, ok := tc.send["kind"]; ok {
					require.Equal(t, kind, msgs[0]["kind"])
				}
				require.Equal(t, sent[1]+"_"+tc.taskID, msgs[1]["id"], read.method)
			}
		})
	}
}

// TestMessagesPastImportedSendersTooLargeForAFrame: an import records a message's id and data.subId of up to 256
// bytes in JSON and its sender of up to 256 chars of any char, where crewlog's own delegate.settle sends a result
// from a sub id of a few dozen. A delegation's result of such ids, or a sender of 256 '<' (six bytes each in JSON, a
// line a worker wrote), whose import.append fit in a frame of 1 KiB, read back larger than the frame without its
// texts and its other names too, and msg.inbox and query.mailbox answered oversize-frame at it for good, the
// orchestrator reading neither it nor any later message. Such a message is sent without its from and data.subId too
// (empty: a message always has a sender), namesOmitted true, its id, kind and the rest of its data as they are.
func TestMessagesPastImportedSendersTooLargeForAFrame(t *testing.T) {
	sub := strings.Repeat("s", 200)
	tests := map[string]map[string]any{
		"a delegation's result of long ids": {"id": strings.Repeat("m", commands.MaxIDChars), "from": "delegate:" + sub,
			"kind": "response", "data": map[string]any{"subId": sub, "ok": true}},
		"a sender JSON writes in six bytes a char": {"id": "m1", "from": strings.Repeat("<", commands.MaxIDChars),
			"kind": "message"},
	}
	for name, m := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{opts: Options{MaxFrame: wire.MaxFrameFloor}})
			a := f.dial()
			a.helloAdmin()
			const run, at = "team_x", int64(1790928000000)
			maps.Copy(m, map[string]any{"to": "", "priority": "normal", "deliveryMode": "next_turn", "body": "b"})
			importEach(t, a, run, at, []importedEvent{
				{events.TypeRunCreated, map[string]any{"team": "t", "goal": "g", "cwd": "/w"}},
				{events.TypeMailboxAppended, m},
				{events.TypeMailboxAppended, map[string]any{"id": "m2", "to": "", "from": "orchestrator",
					"kind": "message", "priority": "normal", "deliveryMode": "next_turn", "body": "after"}},
			})

			for _, method := range []string{"msg.inbox", "query.mailbox"} {
				msgs := everyItem(t, a, method, map[string]any{"runId": run}, "messages")
				require.LessOrEqual(t, a.rd.FrameBytes(), wire.MaxFrameFloor)
				require.Len(t, msgs, 2, "%s lists every message, the one after the first too", method)
				large, small := msgs[0], msgs[1]
				require.Equal(t, m["id"], large["id"], method)
				require.Equal(t, true, large["namesOmitted"], "%s: the sender is left out, and it says so", method)
				require.Equal(t, "", large["from"], method)
				require.Equal(t, m["kind"], large["kind"], method)
				if m["data"] != nil {
					require.Equal(t, map[string]any{"ok": true, "timedOut": false}, large["data"], method)
				}
				require.Equal(t, "orchestrator", small["from"], method)
				require.Equal(t, "after", small["body"], "%s: a message that fits is sent whole", method)
			}
		})
	}
}

// TestTheCommonFitsAllocateNothing: a settlement's result and a worker's message short enough to fit whatever they
// hold, which every settle and msg.send over the socket is measured for, are found to fit without an allocation,
// where the room of an inbox's page was measured anew for each of them (a reader's widest request id made, its
// cursor's JSON marshalled); the room is the one a page of the frame's answer has.
func TestTheCommonFitsAllocateNothing(t *testing.T) {
	for _, frame := range []int{wire.DefaultMaxFrame, 64 << 10, 1 << 20} {
		c := &conn{s: &Server{opts: Options{MaxFrame: frame}}}
		settle := &commands.DelegateSettle{RunID: runR, SubID: "s1", Outcome: "completed", Text: "done"}
		send := &commands.MessageSend{RunID: runR, FromTask: taskP, Body: "hello"}
		require.Zero(t, testing.AllocsPerRun(100, func() { c.fitResult(settle) }), "frame %d", frame)
		require.Zero(t, testing.AllocsPerRun(100, func() {
			if c.messageFits(send) != nil {
				panic("refused")
			}
		}), "frame %d", frame)
		want := frameBudget(frame, strings.Repeat("x", readerIDLen)) - len(`"4294967295"`)
		require.Equal(t, want, inboxPageRoom(frame))
	}
}
