package broker

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/events"
)

// A worker reads the bodies of its own task's messages only — those it sent and those sent to it — in the run's
// events, as msg.inbox lets it read its own mailbox alone: events.since and a subscription give it every
// mailbox.appended of the run, but another task's or the run inbox's without its body. The orchestrator and the
// admin read every body.
func TestEventsShowAWorkerTheBodiesOfItsOwnMessagesOnly(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	s := f.seed()
	o, p, q := f.runViewers(s)
	sub := p.ok("delegate.request", map[string]any{"prompt": "look", "description": "d"})["grandchildTaskRef"].(string)
	sends := []struct {
		name   string
		by     *client
		method string
		params map[string]any
		pSees  bool // whether worker P reads the body
	}{
		{"orchestrator to P", o, "msg.send", map[string]any{"to": taskP, "body": "o-to-p"}, true},
		{"orchestrator to Q", o, "msg.send", map[string]any{"to": taskQ, "body": "o-to-q"}, false},
		{"steer to Q", o, "steer.push", map[string]any{"taskId": taskQ, "body": "steer-q"}, false},
		{"P to Q", p, "msg.send", map[string]any{"to": taskQ, "body": "p-to-q"}, true},
		{"P to the run inbox", p, "msg.send", map[string]any{"to": "parent", "body": "p-to-parent"}, true},
		{"Q to P", q, "escalate", map[string]any{"to": taskP, "body": "q-to-p"}, true},
		{"Q to the run inbox", q, "msg.send", map[string]any{"to": "parent", "body": "q-to-parent"}, false},
		{"Q to itself", q, "escalate", map[string]any{"body": "q-to-q"}, false},
		{"P's delegation's result", o, "delegate.settle", map[string]any{"subId": sub, "outcome": "ok", "text": "res"}, true},
	}
	var want []bool
	for _, c := range sends {
		c.by.ok(c.method, c.params)
		want = append(want, c.pSees)
	}
	bodies := func(evs []json.RawMessage) []bool {
		return fieldsShown(t, evs, map[string]string{events.TypeMailboxAppended: "body"})
	}
	since := func(c *client, params map[string]any) []bool { return bodies(sinceEvents(t, c, params)) }
	all := make([]bool, len(want))
	for i := range all {
		all[i] = true
	}
	for _, v := range []struct {
		name string
		c    *client
		want []bool
	}{{"worker P", p, want}, {"orchestrator", o, all}} {
		t.Run(v.name+" events.since", func(t *testing.T) {
			require.Equal(t, v.want, since(v.c, map[string]any{}))
		})
	}
	t.Run("admin events.since", func(t *testing.T) {
		a := f.dial()
		a.helloAdmin()
		require.Equal(t, all, since(a, map[string]any{"runId": runR}))
	})
	t.Run("worker P subscription", func(t *testing.T) {
		w := f.dial()
		w.hello(runR, taskP, s.p)
		w.ok("events.subscribe", map[string]any{"types": []string{events.TypeMailboxAppended}})
		require.Equal(t, want, bodies(pushedEvents(t, w, len(want))))
	})
}

// A message's subject is as much its recipient's to read as its body: a worker reads the subject of its own task's
// messages only in the run's events, where another task's message shows neither.
func TestEventsShowAWorkerTheSubjectsOfItsOwnMessagesOnly(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	s := f.seed()
	o, p, q := f.runViewers(s)
	o.ok("msg.send", map[string]any{"to": taskP, "body": "b", "subject": "o-to-p"})
	o.ok("msg.send", map[string]any{"to": taskQ, "body": "b", "subject": "o-to-q"})
	q.ok("msg.send", map[string]any{"to": "parent", "body": "b", "subject": "q-to-parent"})
	subjects := func(evs []json.RawMessage) []bool {
		return fieldsShown(t, evs, map[string]string{events.TypeMailboxAppended: "subject"})
	}
	require.Equal(t, []bool{true, true, true}, subjects(sinceEvents(t, o, map[string]any{})))
	require.Equal(t, []bool{true, false, false}, subjects(sinceEvents(t, p, map[string]any{})))
	w := f.dial()
	w.hello(runR, taskP, s.p)
	w.ok("events.subscribe", map[string]any{"types": []string{events.TypeMailboxAppended}})
	require.Equal(t, []bool{true, false, false}, subjects(pushedEvents(t, w, 3)))
}

// A worker reads the arguments and results of its own task's proxied calls only in the run's events, as proxy.result
// answers it for its own job alone: events.since and a subscription give another task's worker proxy.requested
// without args and proxy.completed without result. The job's own worker, the orchestrator and the admin read both.
func TestEventsShowAWorkerTheCallsOfItsOwnJobOnly(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	s := f.seed()
	o, p := f.dial(), f.dial()
	o.hello(runR, events.OrchestratorKey, s.orch)
	p.hello(runR, taskP, s.p)
	nonce := o.ok("job.create", map[string]any{"jobId": "J", "taskId": taskP, "tools": testGrant})["nonce"].(string)
	o.ok("lease.open", map[string]any{"jobId": "J", "mode": "start", "rootToolCallId": "call-1"})
	p.ok("proxy.request", map[string]any{"jobId": "J", "requestId": "r1", "nonce": nonce, "tool": "read",
		"args": map[string]any{"path": "/secret"}})
	o.ok("manifest.revalidate", map[string]any{"jobId": "J", "requestId": "r1", "tools": testGrant})
	o.ok("proxy.complete", map[string]any{"jobId": "J", "requestId": "r1", "nonce": nonce,
		"result": map[string]any{"content": []any{map[string]any{"type": "text", "text": "the secret"}}}})

	// shown lists, for proxy.requested then proxy.completed, whether its args / result key is there.
	shown := func(evs []json.RawMessage) []bool {
		return fieldsShown(t, evs, map[string]string{events.TypeProxyRequested: "args", events.TypeProxyCompleted: "result"})
	}
	a := f.dial()
	a.helloAdmin()
	q := f.dial()
	q.hello(runR, taskQ, s.q)
	for _, v := range []struct {
		name   string
		c      *client
		params map[string]any
		want   []bool
	}{
		{"the job's worker", p, map[string]any{}, []bool{true, true}},
		{"another task's worker", q, map[string]any{}, []bool{false, false}},
		{"orchestrator", o, map[string]any{}, []bool{true, true}},
		{"admin", a, map[string]any{"runId": runR}, []bool{true, true}},
	} {
		t.Run(v.name+" events.since", func(t *testing.T) {
			require.Equal(t, v.want, shown(sinceEvents(t, v.c, v.params)))
		})
	}
	for _, v := range []struct {
		name, task, token string
		want              []bool
	}{
		{"the job's worker", taskP, s.p, []bool{true, true}},
		{"another task's worker", taskQ, s.q, []bool{false, false}},
	} {
		t.Run(v.name+" subscription", func(t *testing.T) {
			w := f.dial()
			w.hello(runR, v.task, v.token)
			w.ok("events.subscribe", map[string]any{"types": []string{events.TypeProxyRequested, events.TypeProxyCompleted}})
			require.Equal(t, v.want, shown(pushedEvents(t, w, len(v.want))))
		})
	}
}

// A worker reads the prompt of a delegation in the run's events only when the delegation is its task's — it asked
// for it, or it is the grandchild the delegation started — as no method shows a worker another task's delegations
// (query.delegations is the runtime's; pi-crew's delegate.admitted carries no prompt): another task's worker reads
// delegate.admitted without its prompt.
func TestEventsShowAWorkerThePromptsOfItsOwnDelegationsOnly(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	s := f.seed()
	o, p, q := f.runViewers(s)
	sub := p.ok("delegate.request", map[string]any{"prompt": "the-prompt", "description": "d"})["grandchildTaskRef"].(string)
	g := f.dial()
	g.hello(runR, sub, o.ok("credential.issue", map[string]any{"taskId": sub})["token"].(string))
	shown := func(evs []json.RawMessage) []bool {
		return fieldsShown(t, evs, map[string]string{events.TypeDelegateAdmitted: "prompt"})
	}
	for _, v := range []struct {
		name string
		c    *client
		want []bool
	}{
		{"the parent's worker", p, []bool{true}},
		{"the grandchild", g, []bool{true}},
		{"another task's worker", q, []bool{false}},
		{"orchestrator", o, []bool{true}},
	} {
		t.Run(v.name+" events.since", func(t *testing.T) {
			require.Equal(t, v.want, shown(sinceEvents(t, v.c, map[string]any{})))
		})
	}
	t.Run("another task's worker subscription", func(t *testing.T) {
		w := f.dial()
		w.hello(runR, taskQ, s.q)
		w.ok("events.subscribe", map[string]any{"types": []string{events.TypeDelegateAdmitted}})
		require.Equal(t, []bool{false}, shown(pushedEvents(t, w, 1)))
	})
}

// A delegation's description, and the shadow task's title made of it, are its asker's text as much as its prompt:
// another task's worker reads delegate.admitted without them, its asker and the orchestrator with them.
func TestEventsShowAWorkerTheDescriptionsOfItsOwnDelegationsOnly(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	s := f.seed()
	o, p, q := f.runViewers(s)
	p.ok("delegate.request", map[string]any{"prompt": "look", "description": "the-description"})
	for _, field := range []string{"description", "title"} {
		shown := func(evs []json.RawMessage) []bool {
			return fieldsShown(t, evs, map[string]string{events.TypeDelegateAdmitted: field})
		}
		for _, v := range []struct {
			name string
			c    *client
			want []bool
		}{{"the asker's worker", p, []bool{true}}, {"another task's worker", q, []bool{false}}, {"orchestrator", o, []bool{true}}} {
			t.Run(field+" "+v.name+" events.since", func(t *testing.T) {
				require.Equal(t, v.want, shown(sinceEvents(t, v.c, map[string]any{})))
			})
		}
	}
	t.Run("another task's worker subscription", func(t *testing.T) {
		w := f.dial()
		w.hello(runR, taskQ, s.q)
		w.ok("events.subscribe", map[string]any{"types": []string{events.TypeDelegateAdmitted}})
		ev := pushedEvents(t, w, 1)[0]
		require.NotContains(t, string(ev), "the-description")
	})
	// Stricter than the table: nothing of the whole page holds the description, the event's message included.
	for _, ev := range sinceEvents(t, q, map[string]any{}) {
		require.NotContains(t, string(ev), "the-description")
	}
}

// sinceEvents is the events of c's events.since page for params.
func sinceEvents(t *testing.T, c *client, params map[string]any) []json.RawMessage {
	t.Helper()
	var res sinceResult
	r := c.call("events.since", params)
	require.Nil(t, r.Error)
	require.NoError(t, json.Unmarshal(r.Result, &res))
	return res.Events
}

// pushedEvents is the data of the next n team.event pushes c is sent (other pushes skipped).
func pushedEvents(t *testing.T, c *client, n int) []json.RawMessage {
	t.Helper()
	var pushed []json.RawMessage
	for len(pushed) < n {
		var ev wire.Event
		frame := c.nextFrame()
		require.NoError(t, json.Unmarshal(frame, &ev), "%s", frame)
		if ev.Name == wire.EventTeamEvent {
			pushed = append(pushed, ev.Data)
		}
	}
	return pushed
}

// fieldsShown lists, for each of evs whose type fields names, whether its data holds that type's field.
func fieldsShown(t *testing.T, evs []json.RawMessage, fields map[string]string) (shown []bool) {
	t.Helper()
	for _, raw := range evs {
		var te struct {
			Type string                     `json:"type"`
			Data map[string]json.RawMessage `json:"data"`
		}
		require.NoError(t, json.Unmarshal(raw, &te))
		if field, ok := fields[te.Type]; ok {
			_, has := te.Data[field]
			shown = append(shown, has)
		}
	}
	return shown
}

// runViewers is run R's orchestrator and its workers of P and Q, each on a connection of its own.
func (f *fixture) runViewers(s seeded) (o, p, q *client) {
	o, p, q = f.dial(), f.dial(), f.dial()
	o.hello(runR, events.OrchestratorKey, s.orch)
	p.hello(runR, taskP, s.p)
	q.hello(runR, taskQ, s.q)
	return o, p, q
}
