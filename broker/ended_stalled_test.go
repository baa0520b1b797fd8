package broker

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// stall makes the connection of w, task P's newest, wait in a write its socket does not take, for as long as the
// fixture's write timeout: its socket buffers a few KiB, and w reads nothing of a page of R's events many times that.
// It returns the connection's server side, its reader serving that page.
func (f *fixture) stall(w *client) *conn {
	f.t.Helper()
	f.streamUsage(f.t, 200)
	c := f.newestConn(taskP)
	require.NoError(f.t, c.nc.SetWriteBuffer(4<<10))
	w.sendLine(`{"id":"page","method":"events.since","params":{"sinceSeq":0}}`)
	require.Eventually(f.t, func() bool {
		c.mu.Lock()
		serving := c.serving
		c.mu.Unlock()
		c.out.mu.Lock()
		defer c.out.mu.Unlock()
		// NB: the page, not the answer before it, which may still count as being written after it was read.
		return serving && c.out.busy && c.out.held > 16<<10
	}, guard, time.Millisecond, "the page's write never waited")
	return c
}

// TestAnEndedCredentialsStalledConnectionHoldsNoPlace: a connection whose client reads nothing when its credential
// ends cannot be written its final frame until the write timeout cuts it off; meanwhile it held its places — the
// credential's connection, wait and subscription places, its run's and the daemon's — and the bytes of the answer it
// was writing against its credential's and its run's outbound budgets, so the worker given a new credential for the
// task was refused too-many-connections, and too-many-waits, and the run's other workers were short of its budget,
// for up to the write timeout after the end, by connections that serve nothing more. The places and those bytes are given back as the connection ends, before its
// final frame, which it is still sent once its client reads.
func TestAnEndedCredentialsStalledConnectionHoldsNoPlace(t *testing.T) {
	for _, tc := range endsOfP {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{opts: Options{MaxConnsPerCredential: 1}, write: time.Hour})
			s := f.seed()
			o := f.dialOrchestrator(s)
			// q, another worker of the run, shares its budgets and limits with w; it goes on unless the run ends.
			q := f.dial()
			q.hello(runR, taskQ, s.q)
			w := f.dial()
			w.hello(runR, taskP, s.p)
			w.sendLine(`{"id":"wait","method":"task.waitStatus","params":{"taskId":"Q","until":"completed",` +
				`"timeoutMs":60000}}`)
			w.ok("ping", nil) // served in order: the wait is in progress
			// NB: of a type the test commits none of: the subscription stays, and pushes nothing to the socket.
			w.ok("events.subscribe", map[string]any{"sinceSeq": f.eng.Head(), "types": []any{"steer.pushed"}})
			c := f.stall(w)

			k := workerKey(taskP)
			type places struct{ all, workers, run, cred, waits, subs int }
			read := func() places {
				f.srv.mu.Lock()
				defer f.srv.mu.Unlock()
				return places{f.srv.places, f.srv.workers, f.srv.runConns[runR], f.srv.credConns[k],
					f.srv.credWaits[k], f.srv.credSubs[k]}
			}
			// NB: the orchestrator's connection holds a place throughout.
			require.Equal(t, places{all: 3, workers: 2, run: 2, cred: 1, waits: 1, subs: 1}, read(), "before the end")
			// outBytes is what the credential's and the run's outbound budgets count (0: no budget, no connection).
			outBytes := func() (cred, run int64) {
				f.srv.mu.Lock()
				defer f.srv.mu.Unlock()
				if b := f.srv.credOut[k]; b != nil {
					cred = b.used.Load()
				}
				if b := f.srv.runOut[runR]; b != nil {
					run = b.used.Load()
				}
				return cred, run
			}
			cred, run := outBytes()
			require.Greater(t, cred, int64(16<<10), "the page's bytes count against the credential's budget")
			require.Greater(t, run, int64(16<<10), "and against the run's")

			tc.end(o)
			others := 1 // q
			if tc.name == "run completed" {
				others = 0
			}
			want := places{all: 1 + others, workers: others, run: others}
			require.Eventually(t, func() bool { return read() == want }, guard, time.Millisecond,
				"the ended connection holds places: %+v", read())
			cred, run = outBytes()
			require.Zero(t, cred, "the ended connection's bytes count against its credential's budget")
			require.Zero(t, run, "the ended connection's bytes count against its run's budget")
			require.Greater(t, f.srv.outBudget.used.Load(), int64(16<<10), "and still against the daemon's")
			c.mu.Lock()
			require.NotNil(t, c.ending, "the connection is ending")
			c.mu.Unlock()
			if tc.name == "re-issued" {
				// The task's new credential, of the same key, gets in, and its wait is counted.
				fresh := f.dial()
				fresh.hello(runR, taskP, o.ok("credential.issue", map[string]any{"taskId": taskP})["token"].(string))
				fresh.sendLine(`{"id":"wait","method":"task.waitStatus","params":{"taskId":"Q",` +
					`"until":"completed","timeoutMs":60000}}`)
				fresh.ok("ping", nil)
				want = places{all: 3, workers: 2, run: 2, cred: 1, waits: 1}
			}
			// The client reads again: it is answered the page, then the one final frame, and the connection closes,
			// giving back nothing twice.
			require.Nil(t, w.answerOf("page").Error)
			w.endsWith(tc.code)
			require.Eventually(t, func() bool {
				f.srv.mu.Lock()
				defer f.srv.mu.Unlock()
				return !f.srv.isOpen(c)
			}, guard, time.Millisecond, "the ended connection was not forgotten")
			require.Equal(t, want, read())
		})
	}
}

// TestAnEndedCredentialsStalledReaderHoldsNoInboundBytes: a connection whose writer waits on a client that reads
// nothing, while its reader holds part of a long line the client sends, held those bytes against its credential's and
// its run's inbound budgets after its credential ended, until the write timeout closed it, so a new credential of the
// task (which counts against the same budget) and the run's other workers were short of them meanwhile. The reader
// leaves both budgets as the connection ends.
func TestAnEndedCredentialsStalledReaderHoldsNoInboundBytes(t *testing.T) {
	for _, tc := range endsOfP {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{write: time.Hour})
			s := f.seed()
			o := f.dialOrchestrator(s)
			q := f.dial() // another worker of the run: the run's budget lives on with it, unless the run ends
			q.hello(runR, taskQ, s.q)
			r := f.dial()
			r.hello(runR, taskP, s.p)
			c := f.newestConn(taskP)
			require.NoError(t, c.nc.SetWriteBuffer(4<<10))
			o.ok("msg.send", map[string]any{"to": taskP, "body": strings.Repeat("m", 64<<10)}) // pushed to r, unread
			go r.nc.Write([]byte(`{"id":"long","method":"ping","params":"` + strings.Repeat("x", 100<<10)))
			k := workerKey(taskP)
			// inUse is what the credential's and the run's inbound budgets count (0: no budget, no connection).
			inUse := func() (cred, run int64) {
				f.srv.mu.Lock()
				defer f.srv.mu.Unlock()
				if b := f.srv.credIn[k]; b != nil {
					cred = b.inUse()
				}
				if b := f.srv.runIn[runR]; b != nil {
					run = b.inUse()
				}
				return cred, run
			}
			require.Eventually(t, func() bool {
				cred, run := inUse()
				c.out.mu.Lock()
				defer c.out.mu.Unlock()
				return cred > 0 && run > 0 && c.out.busy && c.out.held > 16<<10
			}, guard, time.Millisecond, "the long line is not held, or the push is written")

			tc.end(o)
			require.Eventually(t, func() bool {
				cred, run := inUse()
				return cred == 0 && run == 0
			}, guard, time.Millisecond, "the ended connection's line is held against its budgets")
			require.Positive(t, f.srv.inBudget.inUse(), "and still against the daemon's")
			c.mu.Lock()
			require.NotNil(t, c.ending, "the connection is ending")
			c.mu.Unlock()
			r.nc.Close()
		})
	}
}
