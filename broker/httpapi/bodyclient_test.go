package httpapi

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// sendWithBody sends a GET of path with the read-only token and a body of 100 bytes of which it sends two, on a
// connection to base of its own.
func sendWithBody(t *testing.T, base, path string) net.Conn {
	t.Helper()
	c := dial(t, base)
	_, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"+
		"Content-Length: 100\r\n\r\nxx", path, roToken)
	require.NoError(t, err)
	return c
}

// TestARequestWithABodyEndsWhenItsClientGoes: net/http learns that a client went only by reading the connection
// once the request's body has ended, and no route reads a body. So a request sent with one (that never ended)
// went on when its client went: a stream held its place until a write failed, a keep-alive or two later (never,
// with nothing to write), a read waiting for its turn held its waiting place until the turn came, and a rebuild
// its place in the slot's queue. Now each ends when its client goes, as one without a body does.
func TestARequestWithABodyEndsWhenItsClientGoes(t *testing.T) {
	ro := principal{kind: kindReadOnly, key: keyReadOnlyPrefix + digestOf(roToken)}
	for _, tc := range []struct {
		name string
		path string
		// hold makes the request wait (nothing for a stream), until the test ends.
		hold func(t *testing.T, f *fixture)
		// holds reports whether the request holds what it waits for or streams with.
		holds func(f *fixture) bool
	}{
		{"stream", "/api/v1/stream", func(*testing.T, *fixture) {},
			func(f *fixture) bool { return f.srv.streams.open() == 1 }},
		{"read waiting for its turn", "/api/v1/slots",
			func(t *testing.T, f *fixture) {
				for range maxReadsPerCredential {
					done, err := f.srv.reads.Take(t.Context(), ro.key)
					require.NoError(t, err)
					t.Cleanup(done)
				}
			},
			func(f *fixture) bool { _, waiting := f.srv.reads.Load(ro.key); return waiting == 1 }},
		{"rebuild waiting for the slot", budgetRun + "/state?at=5",
			func(t *testing.T, f *fixture) {
				_, done, err := f.srv.states.turn(t.Context(), principal{kind: kindAdmin, key: keyAdmin})
				require.NoError(t, err)
				t.Cleanup(done)
			},
			func(f *fixture) bool { _, waiting := f.srv.states.slot.Load(); return waiting == 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Options{KeepAlive: time.Hour})
			_, base := listening(t, f)
			tc.hold(t, f)
			c := sendWithBody(t, base, tc.path)
			require.Eventually(t, func() bool { return tc.holds(f) }, time.Minute, 5*time.Millisecond, "the request never got there")
			c.Close()
			// NB: a bound, not a timing: without the watch, the request held its place for the hour of its keep-alive.
			require.Eventually(t, func() bool { return !tc.holds(f) }, 10*time.Second, 5*time.Millisecond,
				"the request still holds its place after its client went")
		})
	}
}

// TestAStreamWithABodyLastsWhileItsClientStays: watching its connection for the client going does not end a
// stream sent with a body while its client stays and reads, nor while it sends a body of a few KiB; a client
// that sends more of one than maxUnreadBody is taken as gone.
func TestAStreamWithABodyLastsWhileItsClientStays(t *testing.T) {
	f := newFixture(t, Options{KeepAlive: time.Hour})
	_, base := listening(t, f)
	c := sendWithBody(t, base, "/api/v1/stream")
	resp, _ := closingAnswer(t, c)
	frames := make(chan sseFrame, 1024)
	go readFrames(resp.Body, frames)
	require.Equal(t, "hello", next(t, frames).event)
	_, err := c.Write([]byte(strings.Repeat("y", 8<<10)))
	require.NoError(t, err)
	usage(f, 1)
	require.Equal(t, "task.usage", next(t, frames).event, "the stream goes on")
	require.Equal(t, 1, f.srv.streams.open())

	_, err = c.Write([]byte(strings.Repeat("y", maxUnreadBody)))
	require.NoError(t, err)
	ends(t, frames)
	require.Eventually(t, func() bool { return f.srv.streams.open() == 0 }, 10*time.Second, 5*time.Millisecond,
		"the stream still holds its place")
}
