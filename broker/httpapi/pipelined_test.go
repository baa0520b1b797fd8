package httpapi

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// sendGet sends a GET of path with the credential in auth (an Authorization header's value) on a connection to base
// of its own.
func sendGet(t *testing.T, base, path, auth string) net.Conn {
	t.Helper()
	c := dial(t, base)
	_, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: %s\r\n\r\n", path, auth)
	require.NoError(t, err)
	return c
}

// closingAnswer reads the answer to the request sent on c, requiring a 200 and Connection: close, and returns it
// with the reader of c it was read from.
func closingAnswer(t *testing.T, c net.Conn) (*http.Response, *bufio.Reader) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(time.Minute))) // a guard against a hang
	r := bufio.NewReader(c)
	resp, err := http.ReadResponse(r, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, resp.Close, "Connection: close")
	return resp, r
}

// TestAPipelinedRequestEndsWhenItsClientGoes: net/http stops its background read of a connection at the first byte
// it reads while a request is in progress (a pipelined request) and then no longer ends the request's context when
// the client goes. So a client that sent one more byte behind a GET, then closed, had the GET go on for nobody: a
// stream until its next keep-alive failed (an hour here, 15 s by default), a read waiting out its token's debt, or
// waiting for its turn, until it was served, a rebuild in the slot's queue until it had folded, each holding what
// its credential, or every credential, has a bounded number of. Now each ends when its client goes, pipelined
// bytes or not, as one whose client sends nothing more does.
func TestAPipelinedRequestEndsWhenItsClientGoes(t *testing.T) {
	ro := principal{kind: kindReadOnly, key: keyReadOnlyPrefix + digestOf(roToken)}
	for _, tc := range []struct {
		name, path, auth string
		// hold makes the request wait (nothing for a stream), until the test ends; waiting is the pacing hook's.
		hold func(t *testing.T, f *fixture, pacer *fakePacer)
		// holds reports whether the request holds what it waits for or streams with.
		holds func(f *fixture, waiting <-chan struct{}) bool
	}{
		{"stream", "/api/v1/stream", "Bearer " + adminToken, func(*testing.T, *fixture, *fakePacer) {},
			func(f *fixture, _ <-chan struct{}) bool { return f.srv.streams.open() == 1 }},
		{"stream waiting for its token's bucket", "/api/v1/stream", "Bearer " + roToken,
			func(_ *testing.T, _ *fixture, pacer *fakePacer) { pacer.delay.Store(int64(time.Hour)) },
			func(_ *fixture, waiting <-chan struct{}) bool {
				select {
				case <-waiting:
					return true
				default:
					return false
				}
			}},
		{"read waiting out its token's debt", "/api/v1/slots", "Bearer " + roToken,
			func(_ *testing.T, _ *fixture, pacer *fakePacer) { pacer.delay.Store(int64(time.Hour)) },
			func(f *fixture, _ <-chan struct{}) bool { held, _ := f.srv.reads.Load(ro.key); return held == 1 }},
		{"read waiting for its turn", "/api/v1/slots", "Bearer " + roToken,
			func(t *testing.T, f *fixture, _ *fakePacer) {
				for range maxReadsPerCredential {
					done, err := f.srv.reads.Take(t.Context(), ro.key)
					require.NoError(t, err)
					t.Cleanup(done)
				}
			},
			func(f *fixture, _ <-chan struct{}) bool { _, waiting := f.srv.reads.Load(ro.key); return waiting == 1 }},
		{"rebuild waiting for the slot", budgetRun + "/state?at=5", "Bearer " + roToken,
			func(t *testing.T, f *fixture, _ *fakePacer) {
				_, done, err := f.srv.states.turn(t.Context(), principal{kind: kindAdmin, key: keyAdmin})
				require.NoError(t, err)
				t.Cleanup(done)
			},
			func(f *fixture, _ <-chan struct{}) bool { _, waiting := f.srv.states.slot.Load(); return waiting == 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pacer := newFakePacer()
			f := newFixture(t, Options{Pacer: pacer, KeepAlive: time.Hour})
			waiting := watchPacing(f)
			l, base := listening(t, f)
			tc.hold(t, f, pacer)
			c := sendGet(t, base, tc.path, tc.auth)
			require.Eventually(t, func() bool { return tc.holds(f, waiting) }, time.Minute, 5*time.Millisecond,
				"the request never got there")
			// NB: once the request is in its handler, so that net/http's background read takes the byte, not its
			// read of the request's header.
			_, err := c.Write([]byte("G"))
			require.NoError(t, err)
			require.NoError(t, c.Close())
			// NB: a bound, not a timing: without the watch, the request held on for the hour of its keep-alive or
			// its token's debt, or until what it waited for came.
			require.Eventually(t, func() bool {
				l.mu.Lock()
				defer l.mu.Unlock()
				return l.held == 0
			}, 5*time.Second, 5*time.Millisecond, "the request still holds its connection after its client went")
			require.Zero(t, f.srv.streams.open())
			held, queued := f.srv.reads.Load(ro.key)
			require.Equal(t, []int{0, 0}, []int{max(held-maxReadsPerCredential, 0), queued}, "turns taken or waited for")
			_, queued = f.srv.states.slot.Load()
			require.Zero(t, queued, "rebuilds waiting for the slot")
		})
	}
}

// TestAPipelinedRequestThatWaitedIsAnsweredAndItsConnectionClosed: a read that waited for its token's bucket, with
// a request pipelined behind it, is answered once the debt is paid, and its connection closed after the answer,
// the pipelined request unanswered (its client sends it again); a stream with one goes on while its client stays.
func TestAPipelinedRequestThatWaitedIsAnsweredAndItsConnectionClosed(t *testing.T) {
	pacer := newFakePacer()
	f := newFixture(t, Options{Pacer: pacer, KeepAlive: time.Hour})
	waiting := watchPacing(f)
	_, base := listening(t, f)
	pacer.delay.Store(int64(time.Hour))
	c := sendGet(t, base, "/api/v1/slots", "Bearer "+roToken)
	recv(t, waiting, "wait of the read for its token's bucket")
	_, err := fmt.Fprintf(c, "GET /api/v1/slots HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n",
		roToken)
	require.NoError(t, err)
	pacer.delay.Store(0)
	resp, r := closingAnswer(t, c)
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	_, err = r.ReadByte()
	require.ErrorIs(t, err, io.EOF, "the pipelined request is not answered")

	s := sendGet(t, base, "/api/v1/stream", "Bearer "+adminToken)
	resp, _ = closingAnswer(t, s)
	frames := make(chan sseFrame, 1024)
	go readFrames(resp.Body, frames)
	require.Equal(t, "hello", next(t, frames).event)
	_, err = s.Write([]byte("GET / HTTP/1.1\r\n"))
	require.NoError(t, err)
	usage(f, 1)
	require.Equal(t, "task.usage", next(t, frames).event, "the stream goes on")
	require.Equal(t, 1, f.srv.streams.open())
}
