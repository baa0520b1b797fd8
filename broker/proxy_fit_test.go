package broker

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/commands"
)

// TestProxyCompleteFitsProxyResult: a result is stored canonical and proxy.result answers it as a JSON string, so a
// char can take more bytes in the worker's answer than in the manager's request ('<' is written as six bytes and
// escaped again, a quote as two and escaped again). A result the manager delivers that the worker's proxy.result
// could not answer in a frame would be delivered for good (a second completion is refused) and never read. Such a
// completion is refused oversize-frame with nothing recorded, the call still executing, and a result that fits is
// delivered and read whole, however the request spelt it.
func TestProxyCompleteFitsProxyResult(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	o, w, nonce := leasedJobCall(f, f.seed())
	o.ok("manifest.revalidate", map[string]any{"jobId": "J", "requestId": "r1", "tools": testGrant})
	result := func(text string) map[string]any {
		return map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}}
	}
	complete := func(text string) wire.Response {
		return o.callUnescaped("proxy.complete", map[string]any{"jobId": "J", "requestId": "r1", "nonce": nonce, "result": result(text)})
	}

	for _, text := range []string{
		strings.Repeat("<", wire.DefaultMaxFrame/7), // sent in one byte a char, recorded in six, answered in seven
		strings.Repeat(`"`, wire.DefaultMaxFrame/3), // sent in two bytes a char, recorded in two, answered in four
	} {
		head := f.eng.Head()
		r := complete(text)
		require.NotNil(t, r.Error, "a result proxy.result could not answer is not delivered")
		require.Equal(t, wire.CodeOversizeFrame, r.Error.Code, r.Error.Message)
		require.Equal(t, head, f.eng.Head(), "nothing is recorded")
		require.Equal(t, "executing", w.ok("proxy.result", map[string]any{"jobId": "J", "requestId": "r1"})["state"])
	}

	text := strings.Repeat("<", wire.DefaultMaxFrame/8)
	r := complete(text)
	require.Nil(t, r.Error, "a result that fits is delivered")
	res := w.ok("proxy.result", map[string]any{"jobId": "J", "requestId": "r1"})
	require.Equal(t, "completed", res["state"])
	require.Contains(t, res["result"].(string), strings.Repeat(`\u003c`, 100), "the result is read whole")
}

// TestProxyRequestFitsTheManagersEvents: the manager reads a call's arguments from its proxy.requested event alone
// (events.since, a subscription's push), where they are recorded canonical and written as a JSON string, so a char
// can take more bytes than the worker's request gave it. A call whose event could not be read whole in a frame would
// be admitted with arguments the manager never reads (the event sent with its data left out), holding its place in
// flight until its lease ends. Such a request is refused oversize-frame with nothing recorded, its id not seen, and
// arguments that fit are admitted and read whole.
func TestProxyRequestFitsTheManagersEvents(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	s := f.seed()
	o, w := f.dialOrchestrator(s), f.dial()
	w.hello(runR, taskP, s.p)
	nonce := o.ok("job.create", map[string]any{"jobId": "J", "taskId": taskP, "tools": testGrant})["nonce"].(string)
	o.ok("lease.open", map[string]any{"jobId": "J", "mode": "start", "rootToolCallId": "root-1"})
	request := func(text string) wire.Response {
		return w.callUnescaped("proxy.request", map[string]any{"jobId": "J", "requestId": "r1", "nonce": nonce, "tool": "read",
			"args": map[string]any{"html": text}})
	}

	head := f.eng.Head()
	r := request(strings.Repeat("<", wire.DefaultMaxFrame/7))
	require.NotNil(t, r.Error, "a call whose arguments the manager could not read is not admitted")
	require.Equal(t, wire.CodeOversizeFrame, r.Error.Code, r.Error.Message)
	require.Equal(t, head, f.eng.Head(), "nothing is recorded")

	require.Nil(t, request(strings.Repeat("<", wire.DefaultMaxFrame/8)).Error, "the same id, with arguments that fit")
	var args any
	for _, e := range o.ok("events.since", map[string]any{"sinceSeq": 0, "limit": 1000})["events"].([]any) {
		if ev := e.(map[string]any); ev["type"] == "proxy.requested" {
			args = ev["data"].(map[string]any)["args"]
		}
	}
	require.Contains(t, args, strings.Repeat(`\u003c`, 100), "the manager reads the arguments whole")
}

// TestProxyRequestFitMeasuresWhatCouldBeAdmitted: only a call that is admitted is recorded with its arguments
// (proxy.requested), so the fit is measured for such a call alone. A tool name no grant can hold (longer than a
// grant's names) is refused by the rules, not-granted, its refusal recorded without the arguments and with the name cut:
// it was answered oversize-frame "arguments too large" instead, for arguments of two bytes, measured beside a tool name
// the event would never hold whole.
func TestProxyRequestFitMeasuresWhatCouldBeAdmitted(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	_, w, nonce := leasedJobCall(f, f.seed())
	tool := strings.Repeat("<", wire.DefaultMaxFrame/6) // sent in one byte a char, written in six
	head := f.eng.Head()
	r := w.callUnescaped("proxy.request", map[string]any{"jobId": "J", "requestId": "r2", "nonce": nonce, "tool": tool,
		"args": map[string]any{}})
	require.NotNil(t, r.Error)
	require.Equal(t, wire.CodePolicyDenied, r.Error.Code, r.Error.Message)
	require.Contains(t, r.Error.Message, "is not granted")
	require.Greater(t, f.eng.Head(), head, "the rule's refusal is recorded")
	require.Equal(t, "rejected", w.ok("proxy.result", map[string]any{"jobId": "J", "requestId": "r2"})["state"])
}

// TestProxyRequestFitLeavesABadRequestIDToTheRules: a request id that is no string of 1..MaxRequestIDChars chars is
// refused by the rules (bad-request-id), its refusal recorded without the arguments, so its arguments are not
// measured: however wide, the answer is the rule's, not oversize-frame "arguments too large".
func TestProxyRequestFitLeavesABadRequestIDToTheRules(t *testing.T) {
	for name, requestID := range map[string]string{
		"empty":         "",
		"one char past": strings.Repeat("r", commands.MaxRequestIDChars+1),
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{})
			_, w, nonce := leasedJobCall(f, f.seed())
			head := f.eng.Head()
			r := w.callUnescaped("proxy.request", map[string]any{"jobId": "J", "requestId": requestID, "nonce": nonce,
				"tool": "read", "args": map[string]any{"html": strings.Repeat("<", wire.DefaultMaxFrame/7)}})
			require.NotNil(t, r.Error)
			require.NotEqual(t, wire.CodeOversizeFrame, r.Error.Code, r.Error.Message)
			require.Contains(t, r.Error.Message, "request id must be a string of 1..")
			require.Greater(t, f.eng.Head(), head, "the rule's refusal is recorded")
		})
	}
}
