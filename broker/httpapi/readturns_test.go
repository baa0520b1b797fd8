package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

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

// TestReadsWaitingAreBoundedPerCredential: beyond maxWaitingReadsPerCredential requests of one credential waiting
// for a turn, its next is refused at once, 429 too-many-reads with Retry-After: 1, by bearer or by its session
// alike, and waits for nothing; another credential is still answered; a waiting request whose client went frees
// its place.
func TestReadsWaitingAreBoundedPerCredential(t *testing.T) {
	f := newFixture(t, Options{})
	ro := keyReadOnlyPrefix + digestOf(roToken)
	session := f.spendLink(f.mintLink(roToken))
	bearer := func(tok string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
	}
	cookie := func(r *http.Request) { r.AddCookie(session) }
	request := func(ctx context.Context, auth func(*http.Request)) *http.Request {
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/api/v1/slots", nil)
		req.Host = "127.0.0.1"
		auth(req)
		return req
	}
	// serve answers req in the background and sends its recorder to done.
	serve := func(req *http.Request, done chan<- *httptest.ResponseRecorder) {
		go func() {
			rec := httptest.NewRecorder()
			f.srv.Handler().ServeHTTP(rec, req)
			done <- rec
		}()
	}
	// refused requires a request of the token to be refused, without waiting: the guard only ends the wait of a
	// request that is not.
	refused := func(auth func(*http.Request)) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a guard against a hang, not a timing
		defer cancel()
		rec := httptest.NewRecorder()
		f.srv.Handler().ServeHTTP(rec, request(ctx, auth))
		require.Equal(t, http.StatusTooManyRequests, rec.Code, "body %q", rec.Body)
		require.Equal(t, "1", rec.Header().Get("Retry-After"), "the client is told when to try again")
		var body errorBody
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
		require.Equal(t, codeTooManyReads, body.Error.Code)
		require.NotEmpty(t, body.Error.Message)
		awaitTurns(t, f.srv.reads, ro, maxReadsPerCredential, maxWaitingReadsPerCredential)
	}

	var release []func()
	for range maxReadsPerCredential {
		done, err := f.srv.reads.Take(context.Background(), ro)
		require.NoError(t, err)
		release = append(release, done)
	}
	answered := make(chan *httptest.ResponseRecorder, maxWaitingReadsPerCredential+1)
	leaving, leave := context.WithCancel(t.Context())
	defer leave()
	gone := make(chan *httptest.ResponseRecorder, 1)
	for i := range maxWaitingReadsPerCredential {
		switch i {
		case 0:
			serve(request(leaving, bearer(roToken)), gone)
		case 1:
			serve(request(t.Context(), cookie), answered)
		default:
			serve(request(t.Context(), bearer(roToken)), answered)
		}
		awaitTurns(t, f.srv.reads, ro, maxReadsPerCredential, i+1)
	}
	refused(bearer(roToken))
	refused(cookie)
	admin := make(chan *httptest.ResponseRecorder, 1)
	serve(request(t.Context(), bearer(adminToken)), admin)
	require.Equal(t, http.StatusOK, (<-admin).Code, "another credential is answered")

	leave()
	<-gone
	awaitTurns(t, f.srv.reads, ro, maxReadsPerCredential, maxWaitingReadsPerCredential-1)
	serve(request(t.Context(), bearer(roToken)), answered)
	awaitTurns(t, f.srv.reads, ro, maxReadsPerCredential, maxWaitingReadsPerCredential)
	refused(bearer(roToken))

	for _, done := range release {
		done()
	}
	for range maxWaitingReadsPerCredential {
		require.Equal(t, http.StatusOK, (<-answered).Code)
	}
	awaitTurns(t, f.srv.reads, ro, 0, 0)
	require.Zero(t, f.srv.reads.Keys())
}
