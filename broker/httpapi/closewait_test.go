package httpapi

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAPacedWaitEndsWithTheServer: a read of a read-only token waiting out the token's debt, and a stream waiting
// for the token's bucket to open, did not look at the server's Close: Close waited its grace (2 s) for them, then
// closed their connections. Each now ends at once when the server closes, refused 503 unavailable, as a request
// that comes once Close has begun is, and costs nothing.
func TestAPacedWaitEndsWithTheServer(t *testing.T) {
	for _, path := range []string{"/api/v1/slots", "/api/v1/stream"} {
		t.Run(path, func(t *testing.T) {
			pacer := newFakePacer()
			f := newFixture(t, Options{Pacer: pacer, KeepAlive: time.Hour})
			waiting := watchPacing(f)
			// NB: before it serves; longer than the bound below, so that only the wait's own end meets it.
			f.srv.closeGrace = 10 * time.Second
			_, base := listening(t, f)
			pacer.delay.Store(int64(time.Hour))
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+path, nil)
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+roToken)
			type answer struct {
				status int
				code   string
				err    error
			}
			answered := make(chan answer, 1)
			go func() {
				resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
				if err != nil {
					answered <- answer{err: err}
					return
				}
				defer resp.Body.Close()
				var body struct {
					Error struct{ Code string } `json:"error"`
				}
				_ = json.NewDecoder(resp.Body).Decode(&body)
				answered <- answer{status: resp.StatusCode, code: body.Error.Code}
			}()
			select {
			case <-waiting:
			case <-time.After(time.Minute): // a guard against a hang, not a timing
				t.Fatal("the request never waited for its token's bucket")
			}
			start := time.Now()
			require.NoError(t, f.srv.Close())
			// NB: a bound, not a timing: without the wait's end, Close waited out its grace.
			require.Less(t, time.Since(start), 5*time.Second, "Close waited for the paced wait")
			a := <-answered
			require.NoError(t, a.err)
			require.Equal(t, http.StatusServiceUnavailable, a.status)
			require.Equal(t, codeUnavailable, a.code)
			require.Empty(t, pacer.charges(), "refused as crewd stops: it costs nothing (docs/dashboard-api.md)")
		})
	}
}
