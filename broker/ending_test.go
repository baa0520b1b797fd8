package broker

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/events"
)

// holdReads takes every page-read turn of credential k, so that a page read of it waits, serving, in readTurn;
// the returned function gives the turns back.
func (f *fixture) holdReads(k string) (release func()) {
	f.t.Helper()
	var dones []func()
	for range f.srv.opts.MaxReadsPerCredential {
		done, err := f.srv.reads.Take(f.t.Context(), k)
		require.NoError(f.t, err)
		dones = append(dones, done)
	}
	return func() {
		for _, done := range dones {
			done()
		}
	}
}

// awaitServing waits until the newest connection of task taskID is serving a request (its reader is inside one),
// or, with want false, is not.
func (f *fixture) awaitServing(taskID string, want bool) {
	f.t.Helper()
	c := f.newestConn(taskID)
	require.Eventually(f.t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.serving == want
	}, guard, time.Millisecond, "task %s's connection: serving never %v", taskID, want)
}

// newestConn is the server side of task taskID's newest connection.
func (f *fixture) newestConn(taskID string) *conn {
	f.t.Helper()
	f.srv.mu.Lock()
	defer f.srv.mu.Unlock()
	var newest *conn
	for c := range f.srv.conns {
		if c.id.taskID == taskID && (newest == nil || c.seq > newest.seq) {
			newest = c
		}
	}
	require.NotNil(f.t, newest, "no connection of task %s", taskID)
	return newest
}

// answeredThenRevoked requires c's answer to request id, then ONE revoked frame, then the close, and returns the
// other frames c was sent meanwhile. The answer is that one frame when the request itself was refused as revoked (a
// page read checks its credential again once it has its turn); else a frame answering no request follows it.
func (c *client) answeredThenRevoked(id string) [][]byte {
	c.t.Helper()
	r := c.answerOf(id)
	require.Equal(c.t, id, r.ID, "the request being served is answered")
	if r.Error == nil || r.Error.Code != wire.CodeRevoked {
		end := c.untilError()
		require.Equal(c.t, "", end.ID)
		require.Equal(c.t, wire.CodeRevoked, end.Error.Code)
	}
	c.closed()
	return c.pending
}

// sinceHeld sends events.since "since" on w, task P's connection, and returns once its reader is serving it,
// waiting for a read turn of P's until release is called.
func (f *fixture) sinceHeld(w *client) (release func()) {
	f.t.Helper()
	release = f.holdReads(workerKey(taskP))
	w.sendLine(`{"id":"since","method":"events.since","params":{"sinceSeq":0,"limit":1}}`)
	f.awaitServing(taskP, true)
	return release
}

// dialOrchestrator connects as the seeded run's orchestrator.
func (f *fixture) dialOrchestrator(s seeded) *client {
	f.t.Helper()
	o := f.dial()
	o.hello(runR, events.OrchestratorKey, s.orch)
	return o
}

// endingRun is the seeded run on a server giving each credential one read turn, with its orchestrator's connection
// and task P's.
func endingRun(t *testing.T) (f *fixture, s seeded, o, w *client) {
	f = newFixture(t, fixtureOpts{opts: Options{MaxReadsPerCredential: 1}})
	s = f.seed()
	o = f.dialOrchestrator(s)
	w = f.dial()
	w.hello(runR, taskP, s.p)
	return f, s, o, w
}

// untilPush reads frames until a mailbox push, and returns the push's data.
func (c *client) untilPush() json.RawMessage {
	c.t.Helper()
	for {
		fr, err := c.read()
		require.NoError(c.t, err, "waiting for a push")
		var ev wire.Event
		require.NoError(c.t, json.Unmarshal(fr, &ev))
		if ev.Name == wire.EventMailboxMessage {
			return ev.Data
		}
	}
}

// TestNoPushAfterTheCredentialEndedWhileServing: a connection whose credential ends while its reader is inside a
// request answers that request, then ends; mail published after the end is not pushed to it meanwhile (the feed
// went on pushing to it until the final frame was queued, behind the answer).
func TestNoPushAfterTheCredentialEndedWhileServing(t *testing.T) {
	f, s, o, w := endingRun(t)
	q := f.dial()
	q.hello(runR, taskQ, s.q)
	release := f.sinceHeld(w)

	o.ok("credential.revoke", map[string]any{"taskId": taskP})
	o.ok("msg.send", map[string]any{"to": taskP, "body": "for whoever holds P's next token"})
	// A barrier: the feed pushes in log order, so once the orchestrator is pushed Q's later message, the feed has
	// handled the one to P.
	q.ok("msg.send", map[string]any{"to": "parent", "body": "barrier"})
	o.untilPush()
	release()

	for _, fr := range w.answeredThenRevoked("since") {
		var ev wire.Event
		require.NoError(t, json.Unmarshal(fr, &ev))
		require.NotEqual(t, wire.EventMailboxMessage, ev.Name, "pushed after the revocation: %s", fr)
	}
}

// TestNoWaitAnswerAfterTheCredentialEndedWhileServing: a task.waitStatus whose task moves after the waiting
// connection's credential ended is not answered: the connection answers the request its reader serves, then ends
// with its one final frame.
func TestNoWaitAnswerAfterTheCredentialEndedWhileServing(t *testing.T) {
	f, _, o, w := endingRun(t)
	w.sendLine(`{"id":"wait","method":"task.waitStatus","params":{"taskId":"Q","until":"completed","timeoutMs":60000}}`)
	w.ok("ping", nil)            // served in order: the wait is in progress
	f.awaitServing(taskP, false) // the ping's answer can reach us before its reader is done with it
	sc := f.newestConn(taskP)
	release := f.sinceHeld(w)

	o.ok("credential.revoke", map[string]any{"taskId": taskP})
	require.Eventually(t, func() bool { sc.mu.Lock(); defer sc.mu.Unlock(); return sc.ending != nil }, guard,
		time.Millisecond, "the feed did not end the revoked connection")
	o.ok("task.transition", map[string]any{"taskId": taskQ, "to": "completed"})
	require.Eventually(t, func() bool { sc.mu.Lock(); defer sc.mu.Unlock(); return sc.waits == 0 }, guard,
		time.Millisecond, "the wait did not end")
	release()

	for _, fr := range w.answeredThenRevoked("since") {
		var r wire.Response
		require.NoError(t, json.Unmarshal(fr, &r))
		require.NotEqual(t, "wait", r.ID, "a wait answered after the revocation: %s", fr)
	}
}

// TestPageReadWaitingItsTurnIsNotServedAfterTheCredentialEnded: a page read that waited for its credential's turn
// (held by the client's other reads, for as long as it likes) while the credential was revoked is refused as
// revoked once it has the turn (its answer the connection's final frame), not answered from the state after the revocation: that would carry the revocation
// itself and mail sent after it, to whoever holds the task's next token.
func TestPageReadWaitingItsTurnIsNotServedAfterTheCredentialEnded(t *testing.T) {
	for _, method := range []string{wire.MethodMsgInbox, wire.MethodEventsSince} {
		t.Run(method, func(t *testing.T) {
			f, _, o, w := endingRun(t)
			release := f.holdReads(workerKey(taskP))
			w.sendLine(`{"id":"read","method":"` + method + `","params":{}}`)
			f.awaitServing(taskP, true) // checked once, and waiting for the turn

			o.ok("credential.revoke", map[string]any{"taskId": taskP})
			o.ok("msg.send", map[string]any{"to": taskP, "body": "for whoever holds P's next token"})
			release()

			r := w.answerOf("read")
			require.NotNil(t, r.Error, "%s answered after the revocation: %s", method, r.Result)
			require.Equal(t, wire.CodeRevoked, r.Error.Code, "the request's answer is the connection's final frame")
			w.closed()
		})
	}
}

// holdFeed makes the feed stop, the first time it is about to re-check the connections an event may end, until
// release is called; entered is closed once it has stopped there.
func (f *fixture) holdFeed() (entered <-chan struct{}, release func()) {
	f.t.Helper()
	in, out := make(chan struct{}), make(chan struct{})
	var once sync.Once
	f.srv.mu.Lock()
	f.srv.onEnding = func() {
		once.Do(func() {
			close(in)
			<-out
		})
	}
	f.srv.mu.Unlock()
	var released sync.Once
	release = func() { released.Do(func() { close(out) }) }
	f.t.Cleanup(release)
	return in, release
}

// TestNoWaitAnswerDecidedAfterTheCredentialEndedAheadOfTheFeed: a task.waitStatus whose task moves after the
// waiting connection's credential was revoked is not answered, even when the feed, which ends the connections of
// ended credentials, has not got to the revocation yet: the run's wait follower and the feed follow the log each at
// its own pace, and the wait was answered from a state that held the revocation.
func TestNoWaitAnswerDecidedAfterTheCredentialEndedAheadOfTheFeed(t *testing.T) {
	f, _, o, w := endingRun(t)
	w.sendLine(`{"id":"wait","method":"task.waitStatus","params":{"taskId":"Q","until":"completed","timeoutMs":60000}}`)
	w.ok("ping", nil) // served in order: the wait is in progress
	entered, release := f.holdFeed()

	o.ok("credential.revoke", map[string]any{"taskId": taskP})
	recv(t, entered, "stop of the feed at the revocation") // the feed has seen the revocation, and ended nothing yet
	o.ok("task.transition", map[string]any{"taskId": taskQ, "to": "completed"})

	fr := w.nextFrame()
	var r wire.Response
	require.NoError(t, json.Unmarshal(fr, &r))
	require.NotEqual(t, "wait", r.ID, "a wait answered from a state past its credential's revocation: %s", fr)
	require.Equal(t, "", r.ID)
	require.NotNil(t, r.Error)
	require.Equal(t, wire.CodeRevoked, r.Error.Code)
	release()
	w.closed()
}

// TestARequestAheadOfTheFeedIsRefusedOnceItsCredentialEnded: a request that comes after its credential ended, while
// the feed, which ends the credential's connections, has not got to the end yet, is refused as its hello would be
// now (docs/protocol.md: every later request first re-checks its credential against the newest durable state), with
// the request's id, and the connection closes: a ping is not answered pong, a read reads nothing, a command records
// nothing.
func TestARequestAheadOfTheFeedIsRefusedOnceItsCredentialEnded(t *testing.T) {
	requests := map[string]map[string]any{
		"ping":         nil,
		"events.since": {"sinceSeq": 0},
		"query.slots":  {},
		"escalate":     {"body": "after the end"},
	}
	for _, tc := range endsOfP {
		for method, params := range requests {
			t.Run(tc.name+"/"+method, func(t *testing.T) {
				f, _, o, w := endingRun(t)
				entered, release := f.holdFeed()
				tc.end(o)
				recv(t, entered, "stop of the feed at the end") // the end is published; the feed has ended nothing yet
				head := f.eng.Head()

				r := w.call(method, params)
				require.NotNil(t, r.Error, "%s answered after its credential ended: %s", method, r.Result)
				require.Equal(t, tc.code, r.Error.Code, r.Error.Message)
				w.closed()
				require.Equal(t, head, f.eng.Head(), "recorded after the credential ended")
				release()
			})
		}
	}
}
