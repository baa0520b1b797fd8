package broker

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/events"
)

// refusedHello sends a hello and requires it answered with code, then the close.
func (c *client) refusedHello(runID, taskID, token string, code wire.Code) *wire.Error {
	c.t.Helper()
	e := c.fails("hello", map[string]any{"protocol": 1, "runId": runID, "taskId": taskID, "token": token}, code)
	c.closed()
	return e
}

// TestConnectionsPerCredential: one worker token gets MaxConnsPerCredential connections and a clear refusal
// beyond; another credential of the same run is unaffected, and a closed connection frees its place.
func TestConnectionsPerCredential(t *testing.T) {
	f := newFixture(t, fixtureOpts{opts: Options{MaxConnsPerCredential: 3}})
	s := f.seed()
	held := make([]*client, 3)
	for i := range held {
		held[i] = f.dial()
		held[i].hello(runR, taskP, s.p)
	}
	e := f.dial().refusedHello(runR, taskP, s.p, wire.CodeTooManyConnections)
	require.Contains(t, e.Message, "credential")
	f.dial().hello(runR, taskQ, s.q)
	// The server closes held[0] (second hello); by the time it sees the close, its place is free.
	held[0].fails("hello", map[string]any{"protocol": 1, "runId": runR, "taskId": taskP, "token": s.p}, wire.CodeProtocol)
	held[0].closed()
	f.dial().hello(runR, taskP, s.p)
}

// TestConnectionsPerRunAndReserve: a run's connections are bounded, and workers cannot take the capacity kept
// for the admin and orchestrators.
func TestConnectionsPerRunAndReserve(t *testing.T) {
	t.Run("per run", func(t *testing.T) {
		// A run's workers share MaxConnsPerRun; its orchestrator is bounded per credential only, so however many
		// connections the workers hold, they cannot lock it out of its run.
		f := newFixture(t, fixtureOpts{opts: Options{MaxConnsPerRun: 2, MaxConnsPerCredential: 2}})
		s := f.seed()
		f.dial().hello(runR, taskP, s.p)
		f.dial().hello(runR, events.OrchestratorKey, s.orch)
		f.dial().hello(runR, taskQ, s.q) // the orchestrator's connection takes no worker's place
		e := f.dial().refusedHello(runR, taskQ, s.q, wire.CodeTooManyConnections)
		require.Contains(t, e.Message, "run")
		f.dial().hello(runR, events.OrchestratorKey, s.orch)
		e = f.dial().refusedHello(runR, events.OrchestratorKey, s.orch, wire.CodeTooManyConnections)
		require.Contains(t, e.Message, "credential", "the orchestrator's own bound")
		f.dial().helloAdmin() // the admin is bound to no run
	})
	t.Run("reserve", func(t *testing.T) {
		f := newFixture(t, fixtureOpts{opts: Options{MaxConns: 6, ReservedConns: 3}})
		s := f.seed()
		for i := 0; i < 3; i++ {
			f.dial().hello(runR, taskP, s.p)
		}
		e := f.dial().refusedHello(runR, taskQ, s.q, wire.CodeTooManyConnections)
		require.Contains(t, e.Message, "reserved")
		f.dial().hello(runR, events.OrchestratorKey, s.orch)
		f.dial().helloAdmin()
	})
}

// TestWaitsAndSubscriptionsPerCredential: the limits count over all of a credential's connections, refusals are
// per request (the connection stays), and an ended wait frees its place.
func TestWaitsAndSubscriptionsPerCredential(t *testing.T) {
	f := newFixture(t, fixtureOpts{opts: Options{MaxWaitsPerCredential: 3, MaxSubscriptionsPerCredential: 2}})
	s := f.seed()
	a, b := f.dial(), f.dial()
	a.hello(runR, taskP, s.p)
	b.hello(runR, taskP, s.p)
	for i := 0; i < 2; i++ {
		a.sendLine(fmt.Sprintf(`{"id":"w%d","method":"task.waitStatus","params":{"taskId":"Q","until":"completed","timeoutMs":60000}}`, i))
	}
	a.ok("ping", nil) // the reader serves in order: both waits are counted
	b.sendLine(`{"id":"w2","method":"task.waitStatus","params":{"taskId":"Q","until":"completed","timeoutMs":60000}}`)
	b.ok("ping", nil)
	e := b.fails("task.waitStatus", map[string]any{"taskId": "Q", "until": "completed"}, wire.CodeTooManyWaits)
	require.Contains(t, e.Message, "credential")
	// A short wait ends with wait-timeout and gives its place back... once the other credential's waits are out
	// of the way: Q completes, all three answer, and a new wait is accepted.
	o := f.dial()
	o.hello(runR, events.OrchestratorKey, s.orch)
	o.ok("task.transition", map[string]any{"taskId": taskQ, "to": "completed"})
	for _, id := range []string{"w0", "w1"} {
		require.Equal(t, id, a.answerOf(id).ID)
	}
	require.Equal(t, "w2", b.answerOf("w2").ID)
	b.ok("ping", nil)
	r := b.call("task.waitStatus", map[string]any{"taskId": "Q", "until": "completed"})
	require.Nil(t, r.Error, "the ended waits gave their places back")

	a.ok("events.subscribe", map[string]any{"sinceSeq": 0})
	a.ok("events.subscribe", map[string]any{"sinceSeq": 0}) // a replacement takes no new place
	b.ok("events.subscribe", map[string]any{"sinceSeq": 0})
	c := f.dial()
	c.hello(runR, taskP, s.p)
	e = c.fails("events.subscribe", map[string]any{"sinceSeq": 0}, wire.CodeTooManySubscriptions)
	require.True(t, strings.Contains(e.Message, "limit 2"), e.Message)
	require.Equal(t, true, c.ok("ping", nil)["pong"], "the refusal leaves the connection open")
}

// TestWaitsPerConnection: one connection holds MaxWaitsPerConn waits and its next is refused too-many-waits,
// naming the connection and its limit, while the connection stays open and another connection of the same
// credential still waits; a wait that ends gives its connection's place back.
func TestWaitsPerConnection(t *testing.T) {
	const perConn = 2
	f := newFixture(t, fixtureOpts{opts: Options{MaxWaitsPerConn: perConn, MaxWaitsPerCredential: 10}})
	s := f.seed()
	a, b := f.dial(), f.dial()
	a.hello(runR, taskP, s.p)
	b.hello(runR, taskP, s.p)
	for i := range perConn {
		a.sendLine(fmt.Sprintf(`{"id":"w%d","method":"task.waitStatus","params":{"taskId":"Q","until":"completed","timeoutMs":60000}}`, i))
	}
	a.ok("ping", nil) // the reader serves in order: the waits are counted before the ping is answered
	e := a.fails("task.waitStatus", map[string]any{"taskId": "Q", "until": "completed"}, wire.CodeTooManyWaits)
	require.Contains(t, e.Message, "on this connection")
	require.Contains(t, e.Message, fmt.Sprintf("limit %d", perConn))
	require.Equal(t, true, a.ok("ping", nil)["pong"], "the refusal leaves the connection open")

	b.sendLine(`{"id":"b0","method":"task.waitStatus","params":{"taskId":"Q","until":"completed","timeoutMs":60000}}`)
	b.ok("ping", nil)
	require.Empty(t, b.pending, "the other connection's wait is not refused")

	o := f.dial()
	o.hello(runR, events.OrchestratorKey, s.orch)
	o.ok("task.transition", map[string]any{"taskId": taskQ, "to": "completed"})
	for i := range perConn {
		r := a.answerOf(fmt.Sprintf("w%d", i))
		require.Nil(t, r.Error)
	}
	require.Nil(t, b.answerOf("b0").Error)
	a.ok("ping", nil)
	r := a.call("task.waitStatus", map[string]any{"taskId": "Q", "until": "completed"})
	require.Nil(t, r.Error, "the ended waits gave their connection's places back")
}

// answerOf returns the response with id, from what was read already or from the socket.
func (c *client) answerOf(id string) wire.Response {
	c.t.Helper()
	for i, f := range c.pending {
		var r wire.Response
		if jsonUnmarshal(f, &r) == nil && r.ID == id {
			c.pending = append(c.pending[:i], c.pending[i+1:]...)
			return r
		}
	}
	for {
		f, err := c.read()
		require.NoError(c.t, err, "waiting for the answer to %s", id)
		var r wire.Response
		if jsonUnmarshal(f, &r) == nil && r.ID == id {
			return r
		}
		c.pending = append(c.pending, f)
	}
}

// TestIdleTimeout: an authenticated connection that sends nothing is closed after IdleTimeout with one
// idle-timeout frame; one that holds a wait is not, and any request restarts the clock: a connection that made a
// request is closed IdleTimeout after its answer at the earliest, not after its hello. IdleTimeout is measured on
// the pacer's clock, frozen: it moves only as the test moves it, and the idle timers only pace the checks.
func TestIdleTimeout(t *testing.T) {
	const idle = 20 * time.Millisecond
	f, clock := newIdleFixture(t, idle)
	checks := watchIdleChecks(f)
	s := f.seed()
	waiting := f.dialOrchestrator(s)
	waiting.sendLine(`{"id":"w","method":"task.waitStatus","params":{"taskId":"Q","until":"completed","timeoutMs":60000}}`)
	waiting.ok("ping", nil) // its idle clock starts after this answer
	for i, task := range []string{taskP, taskQ} {
		c := f.dial()
		c.hello(runR, task, map[string]string{taskP: s.p, taskQ: s.q}[task])
		if i == 1 {
			clock.advance(idle / 2) // the time that passes between two requests
			require.Equal(t, true, c.ok("ping", nil)["pong"])
			checks.awaitServed(task) // the connection's idle clock restarts as its reader ends the request
			clock.advance(idle / 2)
			require.False(t, checks.decided(task), "closed IdleTimeout after its hello, though it made a request since")
			clock.advance(idle/2 - time.Nanosecond)
		} else {
			clock.advance(idle - time.Nanosecond)
		}
		require.False(t, checks.decided(task), "closed before it was idle for IdleTimeout")
		clock.advance(time.Nanosecond)
		end := c.untilError()
		require.Equal(t, "", end.ID)
		require.Equal(t, wire.CodeIdleTimeout, end.Error.Code)
		c.closed()
	}
	require.False(t, checks.decided(events.OrchestratorKey), "the connection that holds a wait, idle for twice IdleTimeout")
	require.Equal(t, true, waiting.ok("ping", nil)["pong"])
}

// TestTheIdleClockStartsWithTheHellosAnswer: a connection is idle from the moment its hello is answered, however
// late the goroutine that answered it arms its timer: a client that read the answer and sent nothing for IdleTimeout
// is closed idle-timeout then, not IdleTimeout after the timer happened to be armed.
func TestTheIdleClockStartsWithTheHellosAnswer(t *testing.T) {
	const idle = 20 * time.Millisecond
	f, clock := newIdleFixture(t, idle)
	s := f.seed()
	// The whole of IdleTimeout passes between the hello's bind, which queues its answer, and the rest of the hello.
	f.srv.onBound = func() { clock.advance(idle) }
	c := f.dial()
	c.hello(runR, taskP, s.p)
	end := c.untilError()
	require.Equal(t, "", end.ID)
	require.Equal(t, wire.CodeIdleTimeout, end.Error.Code)
	c.closed()
}

// newIdleFixture is a fixture whose connections are closed after IdleTimeout idle, measured on the pacer's clock,
// frozen: it moves only as the test moves it.
func newIdleFixture(t *testing.T, idle time.Duration) (*fixture, *pacerClock) {
	f := newFixture(t, fixtureOpts{opts: Options{IdleTimeout: idle}})
	clock := installPacerClock(f)
	clock.freeze()
	f.srv.idleNow = clock.p.now
	return f, clock
}

// idleChecks keeps what the idle timers of f's connections decided (Server.idleChecked), and how many requests
// each connection's reader has ended (Server.requestEnded), by their credential's key (a worker's task): a test gives
// each connection a credential of its own.
type idleChecks struct {
	t      testing.TB
	now    func() time.Time // the server's idle clock
	mu     sync.Mutex
	checks []idleCheck
	served map[string]int
	// changed is closed, and replaced, as each check or ended request is kept: decided and awaitServed wait on it
	// for the one they look for.
	changed chan struct{}
}

type idleCheck struct {
	key   string
	at    time.Time
	ended bool
}

// watchIdleChecks must be called before f's first connection, once the test has set the server's idle clock.
func watchIdleChecks(f *fixture) *idleChecks {
	w := &idleChecks{t: f.t, now: f.srv.idleNow, served: map[string]int{}, changed: make(chan struct{})}
	f.srv.idleChecked = func(c *conn, at time.Time, ended bool) {
		w.keep(func() { w.checks = append(w.checks, idleCheck{c.id.key, at, ended}) })
	}
	f.srv.requestEnded = func(c *conn) {
		w.keep(func() { w.served[c.id.key]++ })
	}
	return w
}

// keep records under mu what a hook reported, and wakes whoever waits for it.
func (w *idleChecks) keep(record func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	record()
	close(w.changed)
	w.changed = make(chan struct{})
}

// await waits until found, called under mu, reports true; it fails the test with msg if that never happens.
func (w *idleChecks) await(found func() bool, msg string, args ...any) {
	w.t.Helper()
	hang := time.NewTimer(guard) // a guard against a hang, not a measure
	defer hang.Stop()
	for {
		w.mu.Lock()
		if found() {
			w.mu.Unlock()
			return
		}
		changed := w.changed
		w.mu.Unlock()
		select {
		case <-changed:
		case <-hang.C:
			require.Failf(w.t, "never happened", msg, args...)
		}
	}
}

// awaitServed waits until the reader of the connection of key has ended the request it served: its idle clock
// restarted then.
func (w *idleChecks) awaitServed(key string) {
	w.t.Helper()
	w.await(func() bool { return w.served[key] > 0 }, "the request of %s's connection did not end", key)
}

// decided reports whether the connection of key was ended by its idle timer: at once when a check ended it, else
// once a check was made at the idle clock's reading now (the test does not move it meanwhile).
func (w *idleChecks) decided(key string) bool {
	w.t.Helper()
	now := w.now()
	var ended bool
	w.await(func() bool {
		for _, c := range w.checks {
			if c.key == key && (c.ended || !c.at.Before(now)) {
				ended = c.ended
				return true
			}
		}
		return false
	}, "no idle check of %s's connection at %v", key, now)
	return ended
}

// TestReadTurnsPerCredential: a credential has at most MaxReadsPerCredential page reads in progress; another
// credential's reads and the admin's are not held by it, and a read waiting its turn ends with its connection.
func TestReadTurnsPerCredential(t *testing.T) {
	f := newFixture(t, fixtureOpts{opts: Options{MaxReadsPerCredential: 1}})
	mk := func(role, task string) (*conn, context.CancelFunc) {
		ctx, cancel := context.WithCancel(t.Context())
		return &conn{s: f.srv, id: identity{role: role, runID: runR, taskID: task, key: task}, ctx: ctx,
			done: ctx.Done()}, cancel
	}
	p1, _ := mk(events.RoleWorker, taskP)
	p2, closeP2 := mk(events.RoleWorker, taskP)
	end, ok := p1.readTurn()
	require.True(t, ok)
	q, _ := mk(events.RoleWorker, taskQ)
	endQ, ok := q.readTurn()
	require.True(t, ok, "another credential reads meanwhile")
	endQ()
	admin, _ := mk(events.RoleAdmin, "")
	_, ok = admin.readTurn()
	require.True(t, ok, "the admin is not counted")
	waiting := make(chan bool)
	go func() {
		_, ok := p2.readTurn()
		waiting <- ok
	}()
	awaitReads(t, f.srv, workerKey(taskP), 1, 1)
	closeP2()
	require.False(t, recv(t, waiting, "end of P's second read's wait for a turn"), "P's second read waits for P's turn, and gives up when its connection closes")
	end()
	p3, _ := mk(events.RoleWorker, taskP)
	end, ok = p3.readTurn()
	require.True(t, ok, "the ended read gave its turn back")
	end()
	require.Zero(t, f.srv.reads.Keys(), "no read in progress: no credential's turns are kept")
	require.True(t, pageRead("events.since") && pageRead("msg.inbox") && pageRead("query.tasks") &&
		pageRead("proxy.result"))
	require.False(t, pageRead("ping") || pageRead("msg.send") || pageRead("task.waitStatus"))
}

// TestAnUnreadAnswerKeepsNoReadTurn: a page read gives its credential's turn back once its answer is rendered,
// before it is written, so a connection whose client never reads its socket, its reader waiting (up to
// writeTimeout) to write an answer (answering holds it there), holds none of its credential's MaxReadsPerCredential
// turns meanwhile: the credential's other connections read on.
func TestAnUnreadAnswerKeepsNoReadTurn(t *testing.T) {
	f := newFixture(t, fixtureOpts{opts: Options{MaxReadsPerCredential: 1, RatePerCredential: -1}})
	s := f.seed()
	stalled := f.dial()
	stalled.hello(runR, taskP, s.p)
	sc := f.newestConn(taskP)
	waiting, unread := make(chan struct{}), make(chan struct{})
	f.srv.answering = func(c *conn, method string) {
		if c == sc && method == wire.MethodEventsSince {
			close(waiting)
			<-unread
		}
	}
	t.Cleanup(func() { close(unread) }) // NB: before the fixture's, which closes the server
	stalled.sendLine(`{"id":"s","method":"events.since","params":{"sinceSeq":0,"limit":1}}`)
	select {
	case <-waiting:
	case <-time.After(guard):
		require.FailNow(t, "the answer was never sent")
	}
	awaitReads(t, f.srv, workerKey(taskP), 0, 0)
	other := f.dial()
	other.hello(runR, taskP, s.p)
	require.Len(t, other.ok("events.since", map[string]any{"sinceSeq": 0, "limit": 1})["events"], 1,
		"another connection of the credential reads while the first's answer waits")
}

// awaitReads waits until credential k has held page-read turns and waiting reads waiting for one.
func awaitReads(t *testing.T, s *Server, k string, held, waiting int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	require.NoError(t, s.reads.AwaitLoad(ctx, k, held, waiting))
}

// TestReadTurnsOfPastCredentialsAreForgotten: the page-read turns of a credential are kept only while it reads: a
// daemon that issues credential after credential for its whole life does not keep one entry per credential that
// ever read.
func TestReadTurnsOfPastCredentialsAreForgotten(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	s := f.seed()
	o := f.dialOrchestrator(s)
	const tasks = 20
	for i := range tasks {
		id := fmt.Sprintf("T%02d", i)
		o.ok("task.create", map[string]any{"taskId": id, "role": "explorer", "agent": "a", "title": id, "cwd": "/w/" + id,
			"stepId": id})
		tok := o.ok("credential.issue", map[string]any{"taskId": id})["token"].(string)
		w := f.dial()
		w.hello(runR, id, tok)
		w.ok("msg.inbox", map[string]any{})
		w.ok("events.since", map[string]any{"sinceSeq": 0, "limit": 1})
		o.ok("credential.revoke", map[string]any{"taskId": id})
		// The turn is given back before the answer is written (readPage): none is held by now.
		awaitReads(t, f.srv, workerKey(id), 0, 0)
	}
	require.Zero(t, f.srv.reads.Keys(), "turns kept for credentials with no read in progress")
}

// TestPendingPerPeer: one process's connections that never say hello are bounded, so it cannot fill the daemon
// with them (they have no credential to count against); the extra one is told why, a hello frees a place, and a
// connection closed before its hello frees its place too.
func TestPendingPerPeer(t *testing.T) {
	f := newFixture(t, fixtureOpts{opts: Options{MaxPendingPerPeer: 3, HelloTimeout: time.Minute}})
	silent := []*client{f.dial(), f.dial(), f.dial()}
	extra := f.dial()
	end := extra.untilError()
	require.Equal(t, wire.CodeTooManyConnections, end.Error.Code)
	require.Contains(t, end.Error.Message, "awaiting hello")
	extra.closed()

	silent[0].helloAdmin() // said hello: no longer pending
	f.dial().helloAdmin()  // so another connection gets in, and says hello too
	silent[1].nc.Close()   // closed before its hello: its place frees once the server sees the close
	require.Eventually(t, func() bool {
		f.srv.mu.Lock()
		defer f.srv.mu.Unlock()
		return f.srv.pending[os.Getpid()] == 1 // silent[2] alone
	}, 10*time.Second, time.Millisecond)
}

// TestASubscriptionOfAClosedConnectionIsNotCounted: a connection may be closed by another of its goroutines (its
// writer, on a write error or a client that stopped reading) while its reader serves an events.subscribe; the
// subscription it then counts must not outlive it: forget has run and will not run again, and a count left behind
// holds one of the credential's subscription places for the daemon's life.
func TestASubscriptionOfAClosedConnectionIsNotCounted(t *testing.T) {
	f := newFixture(t, fixtureOpts{opts: Options{MaxSubscriptionsPerCredential: 1}})
	s := f.seed()
	w := f.dial()
	w.hello(runR, taskP, s.p)
	sc := f.newestConn(taskP)
	sc.close(reasonWriteError) // the writer gave up while the reader was inside the request...
	_, err := sc.acquireSubscription(&subscription{c: sc})
	require.Equal(t, errConnClosed, err, "...which then counts the subscription it serves")
	w.closed()

	again := f.dial()
	again.hello(runR, taskP, s.p)
	again.ok("events.subscribe", map[string]any{})
	f.srv.mu.Lock()
	defer f.srv.mu.Unlock()
	require.Equal(t, 1, f.srv.credSubs[workerKey(taskP)], "the closed connection's subscription is counted")
}

// TestAResyncedSubscriptionGivesItsPlaceBack: a subscription ended by a resync no longer counts against its
// credential's MaxSubscriptionsPerCredential, where it counted until its connection closed: another connection of
// the credential subscribes in its place, and the resynced connection, subscribing again, is counted anew.
func TestAResyncedSubscriptionGivesItsPlaceBack(t *testing.T) {
	f := newFixture(t, fixtureOpts{opts: Options{MaxSubscriptionsPerCredential: 1, OutboundBytes: 64 << 10,
		MaxFrame: 16 << 10}, write: time.Minute})
	s := f.seed()
	slow := f.dial()
	slow.hello(runR, taskP, s.p)
	f.streamUsage(t, 3000)
	f.stalledSubscription(slow, taskP)
	slow.untilResync(func(wire.Event) {})

	other := f.dial()
	other.hello(runR, taskP, s.p)
	other.ok("events.subscribe", map[string]any{"sinceSeq": 0, "types": []string{"none"}}) // no push: no resync
	e := slow.fails("events.subscribe", map[string]any{"sinceSeq": 0}, wire.CodeTooManySubscriptions)
	require.Contains(t, e.Message, "limit 1")
	f.srv.mu.Lock()
	defer f.srv.mu.Unlock()
	require.Equal(t, 1, f.srv.credSubs[workerKey(taskP)], "the live subscription alone is counted")
}

// TestAReplacedSubscriptionsResyncGivesNothingBack: a connection's subscriptions count once against its credential's
// MaxSubscriptionsPerCredential, the replacement holding the count of the one it replaced: the replaced one, ending
// with a resync after it was replaced, gives nothing back (the credential would otherwise hold one subscription more
// than it counts), and the current one, ending so, gives the count back once.
func TestAReplacedSubscriptionsResyncGivesNothingBack(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	_, sc := f.workerToServe(f.seed())
	counted := func() int {
		f.srv.mu.Lock()
		defer f.srv.mu.Unlock()
		return f.srv.credSubs[workerKey(taskP)]
	}
	sub := func() *subscription {
		return &subscription{c: sc, stop: make(chan struct{}), done: make(chan struct{})}
	}
	first, second := sub(), sub()
	old, err := sc.acquireSubscription(first)
	require.NoError(t, err)
	require.Nil(t, old)
	old, err = sc.acquireSubscription(second)
	require.NoError(t, err)
	require.Same(t, first, old)
	require.Equal(t, 1, counted(), "a replacement takes no new place")

	sc.releaseSubscription(first)
	require.Equal(t, 1, counted(), "the replaced one's resync gives nothing back: its replacement holds the count")
	sc.releaseSubscription(second)
	require.Zero(t, counted(), "the current subscription's resync gives its count back")
	sc.releaseSubscription(second)
	require.Zero(t, counted(), "once")
}

// TestASubscribeOfAClosedConnectionIsNotAnswered: an events.subscribe served while another goroutine (Server.Close,
// say) closes its connection stops serving it with no answer, as a hello does: close forgets the connection before
// it closes its queue, so an answer queued in between would reach the client with close, a code the method's
// errors do not list.
func TestASubscribeOfAClosedConnectionIsNotAnswered(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	w, sc := f.workerToServe(f.seed())
	f.srv.forget(sc) // close's first step, taken while the reader is inside the request...
	req := wire.Request{ID: "sub", Method: wire.MethodEventsSubscribe, Params: []byte(`{}`)}
	require.False(t, sc.serve(req), "...which then stops serving the connection")
	// NB: close forgets the connection again, which gives nothing back twice: its place and budgets are gone.
	sc.close(reasonServerClosed)
	w.closed()
}

// workerToServe is a connection of task P's credential, with the client and the server's side of it, whose requests
// a test may serve itself rather than its reader.
func (f *fixture) workerToServe(s seeded) (*client, *conn) {
	f.t.Helper()
	w := f.dial()
	w.hello(runR, taskP, s.p)
	sc := f.newestConn(taskP)
	// NB: the hello's answer is queued by its bind, before the reader takes c.mu to start the idle timer: the client
	// may read it first. The reader serves requests in order, so a ping answered has the hello ended, and taking c.mu
	// (which the ping's request took after the hello's writes) orders the caller after them.
	w.ok("ping", nil)
	sc.mu.Lock()
	started := !sc.idleAt.IsZero()
	sc.mu.Unlock() // NB: not held across a failure, which would leave the close that cleans up waiting for it
	require.True(f.t, started, "the reader ended the hello")
	return w, sc
}
