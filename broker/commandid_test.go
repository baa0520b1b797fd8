package broker

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

func TestSplitParams(t *testing.T) {
	cases := []struct {
		name, params, id, rest string
		bad                    bool
	}{
		{"none", `{"prompt":"p"}`, "", `{"prompt":"p"}`, false},
		{"present", `{"prompt":"p","commandId":"c-1"}`, "c-1", `{"prompt":"p"}`, false},
		{"escaped key", `{"prompt":"p","\u0063ommandId":"c-2"}`, "c-2", `{"prompt":"p"}`, false},
		{"escaped value", `{"commandId":"c-\u0033"}`, "c-3", `{}`, false},
		{"every duplicate, the last", `{"commandId":"a","x":1,"commandId":"b"}`, "b", `{"x":1}`, false},
		{"null", `{"commandId":null,"x":1}`, "", `{"x":1}`, false},
		{"not a string", `{"commandId":7}`, "", "", true},
		{"empty", `{"commandId":""}`, "", "", true},
		{"value mentions it", `{"body":"commandId"}`, "", `{"body":"commandId"}`, false},
		{"of the keys no command reads, the least", `{"zz":1,"prompt":"p","y":2,"x":3,"x":4,"\u0077":5}`, "",
			`{"prompt":"p","w":5}`, false},
		{"not an object", `null`, "", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// The same split into a new map and into a connection's previous one, whatever that held.
			for _, reuse := range []map[string]json.RawMessage{nil, {"x": json.RawMessage(`"stale"`), "old": nil}} {
				id, members, err := splitParams("delegate.request", json.RawMessage(c.params), reuse)
				if c.bad {
					require.Equal(t, wire.CodeBadParams, wire.CodeOf(err))
					continue
				}
				require.NoError(t, err)
				require.Equal(t, c.id, id)
				if c.rest == "" {
					require.Nil(t, members)
					continue
				}
				var want map[string]json.RawMessage
				require.NoError(t, json.Unmarshal([]byte(c.rest), &want))
				require.Equal(t, want, members)
			}
		})
	}
}

// A connection keeps its map of members for the next command only while it is as small as a command's params are.
// NB: the keys of every command, which are kept all (splitParams keeps only the least of the others).
func TestSplitParamsKeepsNoGrownMap(t *testing.T) {
	var params strings.Builder
	params.WriteString(`{"commandId":"c"`)
	for k := range commandParamKeys {
		if k != "commandId" {
			fmt.Fprintf(&params, `,%q:1`, k)
		}
	}
	params.WriteString("}")
	_, members, err := splitParams("delegate.request", json.RawMessage(params.String()), nil)
	require.NoError(t, err)
	require.Len(t, members, len(commandParamKeys)-1)
	require.Greater(t, len(members), maxReusedMembers)
	require.Nil(t, reusable(members))
	_, members, err = splitParams("delegate.request", json.RawMessage(`{"prompt":"p","commandId":"c"}`), nil)
	require.NoError(t, err)
	require.Equal(t, members, reusable(members))
}

// The principals that may issue one run's credentials never derive the same secret from the same commandId, and a
// principal's retry derives its own secret again.
func TestTokenNoncePerPrincipal(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	mint := func(p events.Principal, id string) string {
		tok, err := mintToken(key, "R", "T1", tokenNonce(p, id))
		require.NoError(t, err)
		return tok
	}
	admin, orch := events.AdminPrincipal(), events.OrchestratorPrincipal("R")
	require.Equal(t, mint(orch, "ci-1"), mint(orch, "ci-1"), "a retry derives the same secret")
	require.NotEqual(t, mint(admin, "ci-1"), mint(orch, "ci-1"))
	require.NotEqual(t, mint(orch, "ci-1"), mint(events.OrchestratorPrincipal("R2"), "ci-1"))
	require.Equal(t, "ci-1", tokenNonce(admin, "ci-1"), "the admin's nonce is the id, as before format 3")
	require.Empty(t, tokenNonce(orch, ""), "no id: a fresh random nonce")
}

// A worker sees the commandId of its own commands only; the run's orchestrator and the admin see every one.
func TestRenderEventShowsCommandIDsToTheirPrincipal(t *testing.T) {
	p, err := events.EncodePayload(&events.RunRunning{})
	require.NoError(t, err)
	rec := func(role, task string) *eventlog.Event {
		return &eventlog.Event{Stream: "R", StreamVersion: 1, Position: 1, Type: events.TypeRunRunning,
			SchemaVersion: events.SchemaVersion(events.TypeRunRunning), CommandID: "id-" + role + task,
			ActorRole: role, ActorTask: task, Payload: p}
	}
	byOrch, byT1, byT2, byEngine := rec(events.RoleOrchestrator, ""), rec(events.RoleWorker, "T1"),
		rec(events.RoleWorker, "T2"), rec(events.RoleEngine, "")
	viewers := map[string]identity{
		"worker T1":    {role: events.RoleWorker, runID: "R", taskID: "T1"},
		"orchestrator": {role: events.RoleOrchestrator, runID: "R"},
		"admin":        {role: events.RoleAdmin},
	}
	want := map[string][4]bool{ // sees the id of: orchestrator's, T1's, T2's, the engine's
		"worker T1":    {false, true, false, false},
		"orchestrator": {true, true, true, true},
		"admin":        {true, true, true, true},
	}
	for name, v := range viewers {
		for i, r := range []*eventlog.Event{byOrch, byT1, byT2, byEngine} {
			te, err := renderEvent(r, eventViewer{identity: v})
			require.NoError(t, err)
			if want[name][i] {
				require.Equal(t, r.CommandID, te.Metadata.CommandID, "%s sees %s", name, r.CommandID)
			} else {
				require.Empty(t, te.Metadata.CommandID, "%s does not see %s", name, r.CommandID)
			}
		}
	}
}

// A command with a commandId is parsed from the params as sent, less the commandId: a message body that is a JSON
// value is stored as the same text whether or not the request carried one (re-encoding the params once escaped
// <, > and & in it).
func TestCommandIDLeavesTheParamsAsSent(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	s := f.seed()
	o := f.dial()
	o.hello(runR, events.OrchestratorKey, s.orch)
	for i, commandID := range []string{"", `,"commandId":"c-1"`} {
		// NB: a raw line: encoding/json would escape the body's <, > and & itself.
		o.sendLine(fmt.Sprintf(`{"id":"m%d","method":"msg.send","params":{"to":["%s"],"body":{"html":"<b>&</b>"}%s}}`,
			i, taskP, commandID))
		frame, err := o.read()
		require.NoError(t, err)
		var r wire.Response
		require.NoError(t, json.Unmarshal(frame, &r))
		require.Nil(t, r.Error)
	}
	p := f.dial()
	p.hello(runR, taskP, s.p)
	var inbox struct {
		Messages []struct {
			Body string `json:"body"`
		} `json:"messages"`
	}
	r := p.call("msg.inbox", nil)
	require.Nil(t, r.Error)
	require.NoError(t, json.Unmarshal(r.Result, &inbox))
	require.Len(t, inbox.Messages, 2)
	require.Equal(t, `{"html":"<b>&</b>"}`, inbox.Messages[0].Body)
	require.Equal(t, inbox.Messages[0].Body, inbox.Messages[1].Body)
}

// A connection keeps no map a refused request grew (a bad commandId after thousands of keys), and the map it keeps
// between commands holds none of the last request's values.
func TestRunCommandKeepsNoGrownOrFullMap(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	c := &conn{s: f.srv, id: identity{role: events.RoleAdmin}, ctx: t.Context()}
	create := func(run string) {
		t.Helper()
		_, err := runCommand(c, "1", "run.create", json.RawMessage(
			`{"runId":"`+run+`","team":"t","goal":"`+strings.Repeat("g", 1<<10)+`","cwd":"/w","commandId":"`+run+`"}`))
		require.NoError(t, err)
		require.NotNil(t, c.members, "kept for the next command")
		require.Zero(t, len(c.members), "the last request's values are not kept")
	}
	create("R1")

	var params strings.Builder
	params.WriteString(`{"runId":"R2"`)
	for i := range 10_000 {
		fmt.Fprintf(&params, `,"k%d":%d`, i, i)
	}
	params.WriteString(`,"commandId":1}`)
	_, err := runCommand(c, "1", "run.create", json.RawMessage(params.String()))
	require.Equal(t, wire.CodeBadParams, wire.CodeOf(err))
	require.True(t, c.members == nil, "the map the refused request grew (%d keys) is not kept", len(c.members))

	create("R3")
}
