package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadsTakeTurnsPerCredential: one credential has at most maxReadsPerCredential requests in progress; its next
// one waits for a turn (it is not refused), while another credential's requests are answered meanwhile. A
// session's reads are its token's.
func TestReadsTakeTurnsPerCredential(t *testing.T) {
	f := newFixture(t, Options{})
	ro := keyReadOnlyPrefix + digestOf(roToken)
	session := f.spendLink(f.mintLink(roToken))
	// answered gets the status of each request of the token sent below, when it is answered.
	answered := make(chan int, 2)
	serve := func(path string, auth func(*http.Request), done chan<- int) {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Host = "127.0.0.1"
		auth(req)
		go func() {
			rec := httptest.NewRecorder()
			f.srv.Handler().ServeHTTP(rec, req)
			done <- rec.Code
		}()
	}
	bearer := func(tok string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
	}
	// The token's reads in progress, held by the test.
	var release []func()
	for i := 0; i < maxReadsPerCredential; i++ {
		done, err := f.srv.reads.acquire(context.Background(), ro)
		require.NoError(t, err)
		release = append(release, done)
	}
	waitQueued := func(n int) {
		for {
			f.srv.reads.mu.Lock()
			ok, ch := f.srv.reads.queued[ro] == n, f.srv.reads.changed
			f.srv.reads.mu.Unlock()
			if ok {
				return
			}
			select {
			case <-ch:
			case code := <-answered:
				t.Fatalf("the token's read was answered (%d) while its %d others were in progress", code,
					maxReadsPerCredential)
			}
		}
	}
	// The token's next reads, by bearer and by its session, wait for a turn ...
	serve("/api/v1/runs", bearer(roToken), answered)
	serve("/api/v1/slots", func(r *http.Request) { r.AddCookie(session) }, answered)
	waitQueued(maxReadsPerCredential + 2)
	// ... while another credential reads.
	admin := make(chan int, 1)
	serve("/api/v1/runs", bearer(adminToken), admin)
	require.Equal(t, http.StatusOK, <-admin)
	require.Empty(t, answered)
	for _, done := range release {
		done()
	}
	require.Equal(t, http.StatusOK, <-answered)
	require.Equal(t, http.StatusOK, <-answered)
	waitQueued(0)
}
