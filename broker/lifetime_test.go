package broker

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/events"
)

// endsOfP are the ways the credential of task P's connections ends, each by the run's orchestrator o, with the
// code of the one final frame each of those connections is sent.
var endsOfP = []struct {
	name string
	end  func(o *client)
	code wire.Code
}{
	{"revoked", func(o *client) { o.ok("credential.revoke", map[string]any{"taskId": taskP}) }, wire.CodeRevoked},
	{"re-issued", func(o *client) { o.ok("credential.issue", map[string]any{"taskId": taskP}) }, wire.CodeRevoked},
	{"task completed", func(o *client) {
		o.ok("task.transition", map[string]any{"taskId": taskP, "to": "completed"})
	}, wire.CodeStaleToken},
	{"task retried", func(o *client) {
		o.ok("task.transition", map[string]any{"taskId": taskP, "to": "queued", "reason": "retry"})
	}, wire.CodeStaleToken},
	{"run completed", func(o *client) {
		o.ok("run.transition", map[string]any{"to": "completed"})
	}, wire.CodeStaleToken},
}

// endsWith requires c to be sent one frame answering no request, of code, and then to be closed.
func (c *client) endsWith(code wire.Code) {
	c.t.Helper()
	end := c.untilError()
	require.Equal(c.t, "", end.ID, "the final frame answers no request")
	require.Equal(c.t, code, end.Error.Code, end.Error.Message)
	c.closed()
}

// TestNothingACredentialHoldsOutlivesIt: whatever a worker's connections hold when its credential ends — revoked,
// re-issued, its task ended or retried, its run ended — is given back as they end: a connection subscribed and
// waiting (its subscription waiting for a read turn to catch up), one whose reader holds a partly read long line,
// and one whose page read waits for a read turn, are each sent one final frame and closed, and the server then
// counts nothing for the credential: no connection, wait or subscription against its limits, no outbound or inbound
// bytes against its budgets or its run's, no page-read turn, no waited task. The orchestrator's connection goes on.
func TestNothingACredentialHoldsOutlivesIt(t *testing.T) {
	for _, tc := range endsOfP {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{})
			s := f.seed()
			o := f.dialOrchestrator(s)
			waiting, reading := f.dial(), f.dial()
			waiting.hello(runR, taskP, s.p)
			waiting.ok("events.subscribe", map[string]any{"sinceSeq": f.eng.Head()})
			waiting.sendLine(`{"id":"wait","method":"task.waitStatus","params":{"taskId":"Q","until":"completed",` +
				`"timeoutMs":60000}}`)
			waiting.ok("ping", nil) // served in order: the wait is in progress
			reading.hello(runR, taskP, s.p)
			go reading.nc.Write([]byte(`{"id":"long","method":"ping","params":"` + strings.Repeat("x", 100<<10)))
			k := workerKey(taskP)
			require.Eventually(t, func() bool {
				f.srv.mu.Lock()
				defer f.srv.mu.Unlock()
				b := f.srv.credIn[k]
				return b != nil && b.inUse() > 0
			}, guard, time.Millisecond, "the long line is held against P's inbound budget")
			// P's page-read turns are all taken, as by reads of P in progress: a page read waits for one, and so does
			// the subscription's catch-up read of the message sent below.
			release := f.holdReads(k)
			turnWaiting := f.dial()
			turnWaiting.hello(runR, taskP, s.p)
			turnWaiting.sendLine(`{"id":"read","method":"events.since","params":{"sinceSeq":0}}`)
			o.ok("msg.send", map[string]any{"to": taskP, "body": "for the subscription to catch up on"})
			awaitReads(t, f.srv, k, f.srv.opts.MaxReadsPerCredential, 2)

			tc.end(o)
			waiting.endsWith(tc.code)
			reading.endsWith(tc.code)
			awaitReads(t, f.srv, k, f.srv.opts.MaxReadsPerCredential, 1) // the subscription's wait ended with it
			// The page read is being served: its connection's final frame follows its answer, which it has once the
			// reads in progress end (each refused at its own check), and which is its credential's end.
			release()
			if r := turnWaiting.answerOf("read"); r.Error == nil {
				turnWaiting.endsWith(tc.code)
			} else {
				require.Equal(t, tc.code, r.Error.Code, "the page read is answered from after its credential's end")
				turnWaiting.closed()
			}

			// What the server counts for P and its run, read under its lock and checked outside it.
			type counts struct {
				conns, waits, subs, runConns int
				credOut, runOut              *outboundBudget
				credIn, runIn                *inboundBudget
				bound                        int
			}
			read := func() counts {
				f.srv.mu.Lock()
				defer f.srv.mu.Unlock()
				return counts{f.srv.credConns[k], f.srv.credWaits[k], f.srv.credSubs[k], f.srv.runConns[runR],
					f.srv.credOut[k], f.srv.runOut[runR], f.srv.credIn[k], f.srv.runIn[runR], len(f.srv.byRun[runR])}
			}
			// NB: a wait gives its count back as it ends, after its connection's close.
			require.Eventually(t, func() bool { return read().waits == 0 }, guard, time.Millisecond, "waits counted")
			require.Equal(t, counts{bound: 1}, read(), "P is counted for after its connections ended")
			// NB: a connection is forgotten before its reader's bytes are given back (close).
			require.Eventually(t, func() bool { return f.srv.inBudget.inUse() == 0 }, guard, time.Millisecond,
				"inbound bytes held")
			require.Eventually(t, func() bool {
				f.srv.waits.mu.Lock()
				defer f.srv.waits.mu.Unlock()
				return len(f.srv.waits.byRun) == 0
			}, guard, time.Millisecond, "the wait's task is still waited on")
			require.Zero(t, f.srv.reads.Keys(), "page-read turns kept")
			require.Equal(t, true, o.ok("ping", nil)["pong"])
			// NB: the ping's answer is given back once written, which may be after the client has read it.
			require.Eventually(t, func() bool { return f.srv.outBudget.used.Load() == 0 }, guard, time.Millisecond,
				"outbound bytes held")
		})
	}
}

// TestASubscriptionOpenedAsItsCredentialEndsStreamsNothing: an events.subscribe whose credential was checked (serve)
// before the credential ended, and that is answered after, ahead of the feed that ends the credential's connections,
// streams no event: its first pull checks the credential against the state it reads up to, and ends the connection
// with its one final frame instead.
func TestASubscriptionOpenedAsItsCredentialEndsStreamsNothing(t *testing.T) {
	for _, tc := range endsOfP {
		t.Run(tc.name, func(t *testing.T) {
			f, _, o, w := endingRun(t)
			release := f.holdReads(workerKey(taskP))
			w.sendLine(`{"id":"sub","method":"events.subscribe","params":{"sinceSeq":0}}`)
			f.awaitServing(taskP, true) // checked, and waiting for a read turn
			entered, releaseFeed := f.holdFeed()
			tc.end(o)
			recv(t, entered, "stop of the feed at the end") // the feed has seen the end, and ended nothing yet
			o.ok("msg.send", map[string]any{"to": taskP, "body": "after the end"})
			release()

			r := w.answerOf("sub")
			if r.Error == nil {
				w.endsWith(tc.code)
			} else {
				require.Equal(t, tc.code, r.Error.Code, "the answer is the connection's final frame")
				w.closed()
			}
			require.Empty(t, w.pending, "the subscription streamed as its credential ended")
			releaseFeed()
		})
	}
}

// TestAQueryWaitingItsTurnIsNotServedAfterItsCredentialEnded: a query of the run's orchestrator that passed its
// credential's check and waited for a read turn while the credential was revoked is refused as revoked once it has
// the turn, its answer the connection's final frame: it is not answered from the state after the revocation.
func TestAQueryWaitingItsTurnIsNotServedAfterItsCredentialEnded(t *testing.T) {
	for _, method := range []string{"query.run", "query.tasks", "query.delegations", "query.ledger", "query.slots",
		"query.mailbox", "query.jobs"} {
		t.Run(method, func(t *testing.T) {
			f, s, _, _ := endingRun(t)
			admin := f.dial()
			admin.helloAdmin()
			o := f.dialOrchestrator(s) // NB: after the admin's: the newest connection of no task (awaitServing)
			release := f.holdReads(credKey(identity{role: events.RoleOrchestrator, runID: runR, key: events.OrchestratorKey}))
			o.sendLine(`{"id":"read","method":"` + method + `","params":{}}`)
			f.awaitServing("", true) // checked once, and waiting for the turn

			admin.ok("credential.revoke", map[string]any{"runId": runR, "taskId": events.OrchestratorKey})
			admin.ok("msg.send", map[string]any{"runId": runR, "to": taskP, "body": "after the revocation"})
			release()

			r := o.answerOf("read")
			require.NotNil(t, r.Error, "%s answered after the revocation: %s", method, r.Result)
			require.Equal(t, wire.CodeRevoked, r.Error.Code, "the request's answer is the connection's final frame")
			o.closed()
		})
	}
}

// TestAHelloPacedAcrossItsCredentialsEndIsRefusedAtOnce: a hello whose token authenticated, and which waits for its
// credential's pace holding the place it claimed, is refused as soon as the credential ends, with the answer a hello
// would get then, and gives its place back: it does not wait out its pace (the pacer's clock stands still here), nor
// hold the place of the task's re-issued credential meanwhile.
func TestAHelloPacedAcrossItsCredentialsEndIsRefusedAtOnce(t *testing.T) {
	for _, tc := range endsOfP {
		t.Run(tc.name, func(t *testing.T) {
			f, clock, waits, s, o := pacedRun(t)
			clock.freeze()
			late := helloHeldAcross(t, f, s, o, waits.arm, func() {
				waits.await("the second hello did not wait for its credential's budget")
			}, tc.end, tc.code)
			require.Equal(t, tc.code, late.closingError("h").Code, "the hello waited out its pace")
			require.Eventually(t, func() bool {
				f.srv.mu.Lock()
				defer f.srv.mu.Unlock()
				return f.srv.credConns[workerKey(taskP)] == 0
			}, guard, time.Millisecond, "the hello's place is kept")
		})
	}
}
