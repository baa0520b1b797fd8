package httpapi

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
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
	serve("/api/v1/slots", func(r *http.Request) { f.withSession(r, session) }, answered)
	awaitTurns(t, f.srv.reads, ro, maxReadsPerCredential, 2)
	require.Empty(t, answered, "the token's read was answered while its %d others were in progress",
		maxReadsPerCredential)
	// ... while another credential reads.
	admin := make(chan int, 1)
	serve("/api/v1/runs", bearer(adminToken), admin)
	require.Equal(t, http.StatusOK, recv(t, admin, "answer to the admin's read"))
	require.Empty(t, answered)
	for _, done := range release {
		done()
	}
	require.Equal(t, http.StatusOK, recv(t, answered, "answer to the token's first waiting read"))
	require.Equal(t, http.StatusOK, recv(t, answered, "answer to the token's second waiting read"))
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
	cookie := func(r *http.Request) { f.withSession(r, session) }
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
	require.Equal(t, http.StatusOK, recv(t, admin, "answer to the admin's read").Code, "another credential is answered")

	leave()
	recv(t, gone, "end of the read whose client went")
	awaitTurns(t, f.srv.reads, ro, maxReadsPerCredential, maxWaitingReadsPerCredential-1)
	serve(request(t.Context(), bearer(roToken)), answered)
	awaitTurns(t, f.srv.reads, ro, maxReadsPerCredential, maxWaitingReadsPerCredential)
	refused(bearer(roToken))

	for _, done := range release {
		done()
	}
	for range maxWaitingReadsPerCredential {
		require.Equal(t, http.StatusOK, recv(t, answered, "answer to a waiting read").Code)
	}
	awaitTurns(t, f.srv.reads, ro, 0, 0)
	require.Zero(t, f.srv.reads.Keys())
}

// TestARequestThatWaitedIsServedOnlyIfItsCredentialStillIs: a request waits for its credential's read turn, or for
// the rebuild slot, for as long as the requests before it take, or for its credential's pacing for as long as its
// debt takes to repay; a credential revoked (or a session expired) meanwhile gets nothing when the turn comes: 401,
// as the same request sent then, and no rebuild is folded for it. A read that owed an hour waited it out, holding
// its turn and its connection's place, before it looked at its credential again; now it looks every credentialRecheck.
func TestARequestThatWaitedIsServedOnlyIfItsCredentialStillIs(t *testing.T) {
	ro := keyReadOnlyPrefix + digestOf(roToken)
	bearer := func(*fixture, *testClock) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+roToken) }
	}
	session := func(f *fixture, _ *testClock) func(*http.Request) {
		c := f.spendLink(f.mintLink(roToken))
		return func(r *http.Request) { f.withSession(r, c) }
	}
	revoke := func(f *fixture, _ *testClock) { f.tokens.set(roToken, false) }
	for _, tc := range []struct {
		name    string
		auth    func(*fixture, *testClock) func(*http.Request)
		end     func(*fixture, *testClock)
		rebuild bool          // waits for the rebuild slot, not for a read turn
		paced   bool          // waits for its credential's pacing, not for a read turn
		debt    time.Duration // how long the pacing makes it wait at a time (default: 1 ms, again and again)
	}{
		{name: "revoked token waiting for a read turn", auth: bearer, end: revoke},
		{name: "session of a revoked token waiting for a read turn", auth: session, end: revoke},
		{name: "session expired waiting for a read turn", auth: session,
			end: func(_ *fixture, c *testClock) { c.add(SessionLifetime) }},
		{name: "revoked token waiting for the rebuild slot", auth: bearer, end: revoke, rebuild: true},
		{name: "session of a revoked token waiting for the rebuild slot", auth: session, end: revoke, rebuild: true},
		{name: "session expired waiting for the rebuild slot", auth: session,
			end: func(_ *fixture, c *testClock) { c.add(SessionLifetime) }, rebuild: true},
		{name: "revoked token waiting for its pacing", auth: bearer, end: revoke, paced: true},
		{name: "session of a revoked token waiting for its pacing", auth: session, end: revoke, paced: true},
		{name: "session expired waiting for its pacing", auth: session,
			end: func(_ *fixture, c *testClock) { c.add(SessionLifetime) }, paced: true},
		{name: "revoked token waiting out a long debt", auth: bearer, end: revoke, paced: true, debt: time.Hour},
		{name: "session expired waiting out a long debt", auth: session,
			end: func(_ *fixture, c *testClock) { c.add(SessionLifetime) }, paced: true, debt: time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := new(testClock).set(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
			pacer := newFakePacer()
			f := newFixture(t, Options{Now: clock.Now, Pacer: pacer})
			pacing := watchPacing(f)
			auth := tc.auth(f, clock)
			path := "/api/v1/runs"
			var release []func()
			switch {
			case tc.paced:
				// Owed for ever: it waits again and again, and must not wait out a debt its credential outlived.
				pacer.delay.Store(int64(cmp.Or(tc.debt, time.Millisecond)))
			case tc.rebuild:
				path = budgetRun + "/state?at=5"
				_, done, err := f.srv.states.turn(t.Context(), principal{kind: kindAdmin, key: keyAdmin})
				require.NoError(t, err)
				release = append(release, done)
			default:
				for range maxReadsPerCredential {
					done, err := f.srv.reads.Take(context.Background(), ro)
					require.NoError(t, err)
					release = append(release, done)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel) // before the fixture's: a request left waiting by a failure ends
			req := httptest.NewRequestWithContext(ctx, http.MethodGet, path, nil)
			req.Host = "127.0.0.1"
			auth(req)
			answered := make(chan *httptest.ResponseRecorder, 1)
			go func() {
				rec := httptest.NewRecorder()
				f.srv.Handler().ServeHTTP(rec, req)
				answered <- rec
			}()
			switch {
			case tc.paced:
				recv(t, pacing, "wait of the read for its credential's pacing")
			case tc.rebuild:
				awaitSlot(t, f.srv.states.slot, 1, 1)
			default:
				awaitTurns(t, f.srv.reads, ro, maxReadsPerCredential, 1)
			}
			tc.end(f, clock)
			for _, done := range release {
				done()
			}
			rec := recv(t, answered, "answer to the request of an ended credential")
			require.Equal(t, http.StatusUnauthorized, rec.Code, "body %q", rec.Body)
			var body errorBody
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
			require.Equal(t, codeAuth, body.Error.Code)
			require.Equal(t, `Bearer realm="crewlog"`, rec.Header().Get("WWW-Authenticate"))
			if tc.rebuild {
				require.Nil(t, f.srv.states.Base(audittest.RunBudget, 5), "no rebuild was folded for it")
			}
			awaitTurns(t, f.srv.reads, ro, 0, 0)
			require.Zero(t, f.srv.states.rebuilds.Keys(), "its rebuild turn was given back")
			require.Equal(t, []int{0, 0}, slotLoad(f.srv.states.slot), "the rebuild slot is free")
			require.Zero(t, f.srv.states.queued.Load(), "it no longer counts as a rebuild waiting (Retry-After)")
		})
	}
}
