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
		done, err := f.srv.reads.Take(context.Background(), ro)
		require.NoError(t, err)
		release = append(release, done)
	}
	// The token's next reads, by bearer and by its session, wait for a turn ...
	serve("/api/v1/runs", bearer(roToken), answered)
	serve("/api/v1/slots", func(r *http.Request) { r.AddCookie(session) }, answered)
	awaitTurns(t, f.srv.reads, ro, maxReadsPerCredential, 2)
	require.Empty(t, answered, "the token's read was answered while its %d others were in progress",
		maxReadsPerCredential)
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
	awaitTurns(t, f.srv.reads, ro, 0, 0)
	require.Zero(t, f.srv.reads.Keys(), "no request in progress: no credential's turns are kept")
}
