package httpapi

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestListenBoundsTheHeaderAndTheIdleTime: the server Listen makes gives a client 10 s to send a request's line and
// headers, and closes a kept-alive connection that sent no next request for 2 min, as the docs say.
func TestListenBoundsTheHeaderAndTheIdleTime(t *testing.T) {
	requireDocSays(t, "dashboard-api.md",
		fmt.Sprintf("A client has %d s to send a request's line and headers (`ReadHeaderTimeout`",
			int(readHeaderTimeout/time.Second)),
		fmt.Sprintf("sends no next request for %d min is closed (`IdleTimeout`)", int(idleTimeout/time.Minute)))
	f := newFixture(t, Options{})
	listening(t, f)
	f.srv.mu.Lock()
	hs := f.srv.hs
	f.srv.mu.Unlock()
	require.Equal(t, 10*time.Second, hs.ReadHeaderTimeout)
	require.Equal(t, 2*time.Minute, hs.IdleTimeout)
}

// TestAConnectionIsClosedAtItsHeaderOrIdleBound: a connection whose client does not finish its request's header, or
// sends no next request after an answer, is closed once that bound passes, with no answer.
func TestAConnectionIsClosedAtItsHeaderOrIdleBound(t *testing.T) {
	// NB: a guard, not a measure: shorter than either bound as crewd has it, so that only the one the test shortened
	// closes the connection in time.
	const closedWithin = 5 * time.Second
	const bound = 50 * time.Millisecond
	for _, tc := range []struct {
		name    string
		shorten func(s *Server)
		// send writes what the client sends before it goes quiet.
		send func(t *testing.T, c io.Writer, r *bufio.Reader)
	}{
		{"a header never finished", func(s *Server) { s.readHeaderTimeout = bound }, func(t *testing.T, c io.Writer,
			_ *bufio.Reader) {
			_, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
			require.NoError(t, err)
		}},
		{"idle after an answer", func(s *Server) { s.idleTimeout = bound }, func(t *testing.T, c io.Writer,
			r *bufio.Reader) {
			_, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
			require.NoError(t, err)
			resp, err := http.ReadResponse(r, nil)
			require.NoError(t, err)
			_, err = io.Copy(io.Discard, resp.Body)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.False(t, resp.Close, "the answer keeps the connection alive")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Options{})
			tc.shorten(f.srv) // NB: before it listens
			_, base := listening(t, f)
			c := dial(t, base)
			require.NoError(t, c.SetReadDeadline(time.Now().Add(closedWithin)))
			r := bufio.NewReader(c)
			tc.send(t, c, r)
			rest, err := io.ReadAll(r)
			require.NoError(t, err, "the server closed the connection")
			require.Empty(t, rest, "and answered nothing more")
		})
	}
}
