package broker

import (
	"encoding/json"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
)

// TestHelloPacedAcrossARevocationIsRefused: a hello whose credential checked out, but which waits for its
// credential's budget (pacing) while the credential is revoked, is refused (paceHello ends the wait). Before it was
// refused, the connection was bound with the revoked credential: no request ever re-checked it, the feed had
// already re-checked the run's connections before it was bound, and it was pushed the task's mail for as long as
// it stayed idle.
func TestHelloPacedAcrossARevocationIsRefused(t *testing.T) {
	f, clock, waits, s, o := pacedRun(t)
	late := helloHeldAcrossRevocation(t, f, clock, waits, s, o)
	o.ok("msg.send", map[string]any{"to": taskP, "body": "after the revocation"})

	clock.advance(time.Second) // the bucket refills: the held hello goes on
	require.Equal(t, wire.CodeRevoked, late.closingError("h").Code, "a revoked credential was bound")
}

// pacedRun is the seeded run on a server whose credentials' burst is one hello, with the pacer's clock and waits
// watched, and its orchestrator's connection.
func pacedRun(t *testing.T) (f *fixture, clock *pacerClock, waits *pacerWaits, s seeded, o *client) {
	t.Helper()
	f = newFixture(t, fixtureOpts{opts: Options{RatePerCredential: 1000, BurstPerCredential: helloCost}})
	clock = installPacerClock(f)
	waits = watchPacerWaits(f)
	s = f.seed()
	return f, clock, waits, s, f.dialOrchestrator(s)
}

// helloHeldAcrossRevocation freezes clock, spends task P's burst on one hello and sends another (id "h") that waits
// for P's bucket, then revokes P through o and returns the waiting hello's connection once the feed has handled the
// revocation (it ended the first connection).
func helloHeldAcrossRevocation(t *testing.T, f *fixture, clock *pacerClock, waits *pacerWaits, s seeded, o *client) *client {
	t.Helper()
	clock.freeze()
	return helloHeldAcross(t, f, s, o, waits.arm, func() {
		waits.await("the second hello did not wait for its credential's budget")
	}, revokeP, wire.CodeRevoked)
}

// helloHeldPastItsPace sends a hello of task P (id "h") and holds it with paced once its pace let it in, before its
// bind, then revokes P through o and returns the hello's connection once the feed has handled the revocation (it
// ended the connection of P's hello before).
func helloHeldPastItsPace(t *testing.T, f *fixture, paced *bindHold, s seeded, o *client) *client {
	t.Helper()
	return helloHeldAcross(t, f, s, o, paced.arm, func() { paced.awaitBound(t) }, revokeP, wire.CodeRevoked)
}

func revokeP(o *client) { o.ok("credential.revoke", map[string]any{"taskId": taskP}) }

// helloHeldAcross says hello as task P on one connection, arms a hold (arm) and sends another hello of P (id "h"),
// which awaitHeld waits to be held, then ends P's credential through o (end) and returns the held hello's connection
// once the feed has handled the end: it ended the first connection, with code.
func helloHeldAcross(t *testing.T, f *fixture, s seeded, o *client, arm, awaitHeld func(), end func(o *client),
	code wire.Code) *client {
	t.Helper()
	first := f.dial()
	first.hello(runR, taskP, s.p) // with a burst of one hello, the whole of it: P's next hello waits for its bucket
	arm()
	late := f.dial()
	late.sendLine(`{"id":"h","method":"hello","params":{"protocol":1,"runId":"R1","taskId":"P","token":"` + s.p + `"}}`)
	awaitHeld()
	end(o)
	require.Equal(t, code, first.untilError().Error.Code, "the feed has handled the end")
	return late
}

// TestRefusedHellosArePacedPerProcess: a hello its token does not authenticate costs the connecting process (by its
// pid) helloCost units, as an accepted one costs its credential: a process dialling with a wrong token in a loop
// is answered at the pacing rate, not as fast as it can dial. Until it was, nothing paced it (no credential to
// charge) and one process had thousands of refusals a second computed for it.
func TestRefusedHellosArePacedPerProcess(t *testing.T) {
	f := newFixture(t, fixtureOpts{opts: Options{RatePerCredential: 1000, BurstPerCredential: 2 * helloCost}})
	clock := installPacerClock(f)
	waits := watchPacerWaits(f)
	s := f.seed()
	clock.freeze()
	for range 2 { // the burst
		f.dial().refusedHello(runR, taskP, "wrong", wire.CodeStaleToken)
	}
	waits.arm()
	late := f.dial()
	late.sendLine(`{"id":"h","method":"hello","params":{"protocol":1,"runId":"R1","taskId":"P","token":"wrong"}}`)
	waits.await("the third refused hello was not paced")
	require.Equal(t, 0.0, clock.level(peerKey(os.Getpid())), "its answer waits for the process's bucket")
	clock.advance(time.Second) // the bucket refills: the hello is answered
	require.Equal(t, wire.CodeStaleToken, late.closingError("h").Code)
	f.dialOrchestrator(s).ok("ping", nil) // an accepted hello costs its credential, not its process
}

// TestNoPushToAHelloBoundAfterItsRevocation: a hello whose credential is revoked after its pace let it in, before
// its bind (after authenticate) is not pushed the mail sent after the revocation. The feed ended the run's
// connections for the revocation before this one was bound, so only the hello's own check of its credential keeps
// the later pushes from it. That check came after the bind, which publishes the connection to the feed: mail sent
// between the two was queued for the revoked connection and written before its refusal. The hello is held
// (onBound) once its bind is decided, while the mail is sent and the feed handles it.
func TestNoPushToAHelloBoundAfterItsRevocation(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	h := holdBinds(f)
	paced := holdPaced(f)
	s := f.seed()
	o := f.dialOrchestrator(s)
	q := f.dial()
	q.hello(runR, taskQ, s.q)
	late := helloHeldPastItsPace(t, f, paced, s, o)
	h.arm()
	paced.release() // the held hello goes on to its bind
	h.awaitBound(t)
	mailPThroughTheFeed(o, q, "after the revocation")
	h.release()

	for {
		frame, err := late.read()
		if err != nil {
			require.True(t, isEOF(err), "%v", err)
			break
		}
		var r struct {
			ID    string      `json:"id"`
			Event string      `json:"event"`
			Error *wire.Error `json:"error"`
		}
		require.NoError(t, json.Unmarshal(frame, &r))
		require.NotEqual(t, wire.EventMailboxMessage, r.Event, "pushed to a revoked credential: %s", frame)
		require.Equal(t, "h", r.ID, "%s", frame)
		require.NotNil(t, r.Error, "a revoked credential was bound: %s", frame)
		require.Equal(t, wire.CodeRevoked, r.Error.Code)
	}
}

// TestTheHelloAnswerIsAConnectionsFirstFrame: mail sent to a worker while its hello is being bound is pushed after
// the hello's answer, never before it. The bind publishes the connection to the feed before the answer was queued,
// so a message the feed handled in between was written first, and a client that reads the hello answer as the
// first frame (the TypeScript client refuses anything else as a protocol error) failed its connection. The hello
// is held (onBound) once bound, while the mail is sent and the feed pushes it.
func TestTheHelloAnswerIsAConnectionsFirstFrame(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	h := holdBinds(f)
	s := f.seed()
	o := f.dialOrchestrator(s)
	q := f.dial()
	q.hello(runR, taskQ, s.q)
	h.arm()
	p := f.dial()
	p.sendLine(`{"id":"h","method":"hello","params":{"protocol":1,"runId":"R1","taskId":"P","token":"` + s.p + `"}}`)
	h.awaitBound(t)
	mailPThroughTheFeed(o, q, "while P says hello")
	h.release()

	var first struct {
		ID     string          `json:"id"`
		Event  string          `json:"event"`
		Result json.RawMessage `json:"result"`
	}
	frame, err := p.read()
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(frame, &first))
	require.Equal(t, "h", first.ID, "the first frame is not the hello answer: %s", frame)
	require.NotEmpty(t, first.Result)
	var push wire.Event
	frame, err = p.read()
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(frame, &push))
	require.Equal(t, wire.EventMailboxMessage, push.Name, "the mail sent after the bind is pushed: %s", frame)
}

// bindHold holds a hello once its bind is decided (the server's onBound), or once paced (onPaced), before it goes on,
// when armed.
type bindHold struct {
	armed         atomic.Bool
	bound, resume chan struct{}
	released      sync.Once
}

// holdBinds installs a bindHold on f's server, released at the latest as the test ends.
func holdBinds(f *fixture) *bindHold {
	h := newBindHold(f)
	f.srv.onBound = h.hold
	return h
}

// holdPaced installs on f's server a bindHold that holds the armed hello once its pace let it in, before its bind
// (onPaced), rather than once bound.
func holdPaced(f *fixture) *bindHold {
	h := newBindHold(f)
	f.srv.onPaced = h.hold
	return h
}

// newBindHold is a bindHold released as f's test ends (before the fixture's close, which waits for the held
// hello's connection), so that a test that fails while a hello is held does not leave the server waiting on it.
func newBindHold(f *fixture) *bindHold {
	h := &bindHold{bound: make(chan struct{}), resume: make(chan struct{})}
	f.t.Cleanup(h.release)
	return h
}

// hold holds the calling hello, if armed, until release.
func (h *bindHold) hold() {
	if h.armed.CompareAndSwap(true, false) {
		select {
		case h.bound <- struct{}{}:
		case <-h.resume: // released before the test awaited the hold
		}
		<-h.resume
	}
}

// arm holds the next hello to be bound.
func (h *bindHold) arm() { h.armed.Store(true) }

// awaitBound waits until the armed hello is held.
func (h *bindHold) awaitBound(t *testing.T) {
	t.Helper()
	select {
	case <-h.bound:
	case <-time.After(guard):
		t.Fatal("the hello was not bound")
	}
}

// release lets the held hello go on.
func (h *bindHold) release() { h.released.Do(func() { close(h.resume) }) }

// mailPThroughTheFeed sends task P a message through the orchestrator's connection o and returns once the feed has
// decided its push: the feed pushes in log order, so once o is pushed the later message worker connection q sends
// to its parent, the one to P is behind it.
func mailPThroughTheFeed(o, q *client, body string) {
	o.ok("msg.send", map[string]any{"to": taskP, "body": body})
	q.ok("msg.send", map[string]any{"to": "parent", "body": "barrier"})
	o.untilPush()
}
