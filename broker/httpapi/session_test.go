package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// noRedirect is a client that shows the login route's 303 instead of following it.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// mintLink asks POST /api/v1/login for a login link with the bearer token tok.
func (f *fixture) mintLink(tok string) string {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.web.URL+"/api/v1/login", nil)
	require.NoError(f.t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	code, m := f.send(req)
	require.Equal(f.t, http.StatusOK, code, "%v", m)
	return m["url"].(string)
}

// spendLink opens link and returns the session cookie it sets, or nil when the link is refused.
func (f *fixture) spendLink(link string) *http.Cookie {
	f.t.Helper()
	resp, err := noRedirect.Get(link)
	require.NoError(f.t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		require.Equal(f.t, http.StatusUnauthorized, resp.StatusCode)
		require.Empty(f.t, resp.Cookies())
		return nil
	}
	require.Len(f.t, resp.Cookies(), 1)
	return resp.Cookies()[0]
}

// withSession makes req a request of the page in session c: its cookie, with the proof its login gave the page.
func (f *fixture) withSession(req *http.Request, c *http.Cookie) {
	req.AddCookie(c)
	req.Header.Set(proofHeader, f.srv.sessionProof(c.Value))
}

// sessionHeader is the header of the page's requests in session c (openStream): its cookie and its proof.
func (f *fixture) sessionHeader(c *http.Cookie) http.Header {
	return http.Header{"Cookie": {c.String()}, proofHeader: {f.srv.sessionProof(c.Value)}}
}

// readsWith is the status of GET /api/v1/runs with the session cookie c.
func (f *fixture) readsWith(c *http.Cookie) int {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodGet, f.web.URL+"/api/v1/runs", nil)
	require.NoError(f.t, err)
	f.withSession(req, c)
	code, _ := f.send(req)
	return code
}

// TestASessionLastsOnlyAsLongAsTheTokenThatOpenedIt: a read-only token's login link opens a session that is that
// token's: once the token is revoked, the session and every link it minted and nobody spent are refused, while
// the sessions of other credentials go on.
func TestASessionLastsOnlyAsLongAsTheTokenThatOpenedIt(t *testing.T) {
	f := newFixture(t, Options{})
	ro := f.spendLink(f.mintLink(roToken))
	require.NotNil(t, ro)
	unspent := f.mintLink(roToken)
	admin := f.spendLink(f.mintLink(adminToken))
	start, _ := f.srv.LoginURL()
	crewd := f.spendLink(start)
	for _, c := range []*http.Cookie{ro, admin, crewd} {
		require.Equal(t, http.StatusOK, f.readsWith(c))
	}

	f.tokens.set(roToken, false)
	require.Equal(t, http.StatusUnauthorized, f.readsWith(ro), "the session of a revoked token")
	require.Nil(t, f.spendLink(unspent), "a link minted by a revoked token")
	require.Equal(t, http.StatusOK, f.readsWith(admin))
	require.Equal(t, http.StatusOK, f.readsWith(crewd))

	// Revocation ends the session for good: the token coming back does not bring it back.
	f.tokens.set(roToken, true)
	require.Equal(t, http.StatusUnauthorized, f.readsWith(ro))
}

// TestASessionCountsAgainstItsTokensLimits: sessions opened with one token's links share that token's stream
// limit, so opening sessions does not multiply it.
func TestASessionCountsAgainstItsTokensLimits(t *testing.T) {
	f := newFixture(t, Options{MaxStreamsPerPrincipal: 1})
	frames := f.openStream("/api/v1/stream", http.Header{"Authorization": {"Bearer " + roToken}})
	require.Equal(t, "hello", next(t, frames).event)
	for i := 0; i < 2; i++ {
		c := f.spendLink(f.mintLink(roToken))
		req, err := http.NewRequest(http.MethodGet, f.web.URL+"/api/v1/stream", nil)
		require.NoError(t, err)
		f.withSession(req, c)
		resp, err := f.web.Client().Do(req)
		require.NoError(t, err)
		status := resp.StatusCode
		if status != http.StatusTooManyRequests {
			resp.Body.Close() // NB: a stream's body never ends on its own
		}
		require.Equal(t, http.StatusTooManyRequests, status, "session %d", i)
		var m errorBody
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&m))
		resp.Body.Close()
		require.Equal(t, codeTooManyStreams, m.Error.Code)
	}
	// Another credential's session has its own.
	start, _ := f.srv.LoginURL()
	c := f.spendLink(start)
	other := f.openStream("/api/v1/stream", f.sessionHeader(c))
	require.Equal(t, "hello", next(t, other).event)
}

// TestOneTokensLoginsCannotLogOthersOut: a token that mints and spends far more login links than the server keeps
// sessions and codes only pushes out its own (the oldest of them); other credentials' sessions and unspent
// links stay valid.
func TestOneTokensLoginsCannotLogOthersOut(t *testing.T) {
	const maxSessions = 64
	f := newFixture(t, Options{MaxSessions: maxSessions})
	start, _ := f.srv.LoginURL()
	crewd := f.spendLink(start)
	admin := f.spendLink(f.mintLink(adminToken))
	adminLink := f.mintLink(adminToken)

	// In process: thousands of requests through the handler, no sockets.
	h := f.srv.Handler()
	var ro []*http.Cookie
	for i := 0; i < 2*maxSessions+maxLoginCodes; i++ {
		req := httptest.NewRequest(http.MethodPost, "/api/v1/login", nil)
		req.Host = "127.0.0.1"
		req.Header.Set("Authorization", "Bearer "+roToken)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code)
		link := jsonBody(t, rec)["url"].(string)
		if i%2 == 1 {
			continue // left unspent: fills the codes
		}
		req = httptest.NewRequest(http.MethodGet, link, nil)
		req.Host = "127.0.0.1"
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusSeeOther, rec.Code)
		ro = append(ro, rec.Result().Cookies()[0])
	}

	require.Equal(t, http.StatusOK, f.readsWith(crewd))
	require.Equal(t, http.StatusOK, f.readsWith(admin))
	require.NotNil(t, f.spendLink(adminLink), "another credential's unspent link")
	valid := 0
	for _, c := range ro {
		if f.readsWith(c) == http.StatusOK {
			valid++
		}
	}
	require.Equal(t, maxSessionsPerCredential, valid, "the token keeps its newest sessions only")
	require.Equal(t, http.StatusOK, f.readsWith(ro[len(ro)-1]))
}

func jsonBody(t *testing.T, rec *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &m), "body %s", rec.Body)
	return m
}

// TestSessionCookieOnlyFromThePagesOwnOrigin: SameSite=Strict sends the cookie with requests from every origin of
// the same site — another port of 127.0.0.1, such as a dev server a worker started — so a request whose browser
// says it came from another origin (Sec-Fetch-Site) is refused; the page's own requests, the user's own
// navigation and clients that send no such header are served.
func TestSessionCookieOnlyFromThePagesOwnOrigin(t *testing.T) {
	f := newFixture(t, Options{})
	start, _ := f.srv.LoginURL()
	c := f.spendLink(start)
	for _, tc := range []struct {
		site string
		want int
	}{
		{"", http.StatusOK},
		{"same-origin", http.StatusOK},
		{"none", http.StatusOK},
		{"same-site", http.StatusForbidden},
		{"cross-site", http.StatusForbidden},
	} {
		for _, path := range []string{"/api/v1/runs", "/api/v1/stream"} {
			req, err := http.NewRequest(http.MethodGet, f.web.URL+path, nil)
			require.NoError(t, err)
			f.withSession(req, c)
			if tc.site != "" {
				req.Header.Set("Sec-Fetch-Site", tc.site)
			}
			resp, err := f.web.Client().Do(req)
			require.NoError(t, err)
			resp.Body.Close() // NB: a stream's body never ends on its own
			require.Equal(t, tc.want, resp.StatusCode, "%s with Sec-Fetch-Site %q", path, tc.site)
		}
	}
	// A bearer token is never sent by a browser on its own: the header does not matter.
	req, err := http.NewRequest(http.MethodGet, f.web.URL+"/api/v1/runs", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+roToken)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	code, _ := f.send(req)
	require.Equal(t, http.StatusOK, code)
}

// TestASessionCookieAloneDoesNotAuthenticate: a browser sends the session cookie to every port of its host name, so
// a server a worker runs on another port of 127.0.0.1 gets it when the operator opens one of its pages, and can
// replay it from outside a browser, with no Sec-Fetch-Site. It reads nothing: the session also needs the proof its
// login gave the page in the redirect's fragment, which that server never sees — in a header, or on the stream
// (EventSource sends no header of its own) in the query.
func TestASessionCookieAloneDoesNotAuthenticate(t *testing.T) {
	f := newFixture(t, Options{})
	start, _ := f.srv.LoginURL()
	c := f.spendLink(start)
	other := f.spendLink(f.mintLink(adminToken))
	status := func(path string, proof string) int {
		req, err := http.NewRequest(http.MethodGet, f.web.URL+path, nil)
		require.NoError(t, err)
		req.AddCookie(c)
		if proof != "" {
			req.Header.Set(proofHeader, proof)
		}
		resp, err := f.web.Client().Do(req)
		require.NoError(t, err)
		resp.Body.Close() // NB: a stream's body never ends on its own
		return resp.StatusCode
	}
	proof := f.srv.sessionProof(c.Value)
	for _, path := range []string{"/api/v1/runs", "/api/v1/stream", "/metrics"} {
		require.Equal(t, http.StatusUnauthorized, status(path, ""), "%s with the cookie alone", path)
		require.Equal(t, http.StatusUnauthorized, status(path, f.srv.sessionProof(other.Value)),
			"%s with another session's proof", path)
		require.Equal(t, http.StatusUnauthorized, status(path, proof[1:]), "%s with a cut proof", path)
	}
	for _, path := range []string{"/api/v1/runs", "/metrics"} {
		require.Equal(t, http.StatusUnauthorized, status(path+"?proof="+proof, ""),
			"%s takes the proof in its header only", path)
	}
	require.Equal(t, http.StatusOK, status("/api/v1/runs", proof))
	require.Equal(t, http.StatusOK, status("/api/v1/stream", proof))
	require.Equal(t, http.StatusOK, status("/api/v1/stream?proof="+proof, ""), "the page's EventSource")
}

// TestASessionCookieSetByAnotherPortDoesNotShadowThePages: cookies are not kept apart by port either way, so a server
// a worker runs on another port of 127.0.0.1 can also set one for the dashboard: crewlog_session with a longer Path
// (/api) than the page's (/), which the browser then sends first with each of the page's requests, and Path=/
// cannot replace. The server read only the first cookie of the name: the page's own session, with its proof,
// was refused 401 while the planted cookie lived, and a new login link set only another Path=/ cookie, shadowed
// the same way. The session is now the cookie the request's proof was made for; without a matching proof, none.
func TestASessionCookieSetByAnotherPortDoesNotShadowThePages(t *testing.T) {
	f := newFixture(t, Options{})
	start, _ := f.srv.LoginURL()
	page := f.spendLink(start)
	planted := f.spendLink(f.mintLink(roToken)) // the worker's own session, or any value at all
	status := func(path, proof string, cookies ...*http.Cookie) int {
		req, err := http.NewRequest(http.MethodGet, f.web.URL+path, nil)
		require.NoError(t, err)
		for _, c := range cookies {
			req.AddCookie(c)
		}
		req.Header.Set(proofHeader, proof)
		resp, err := f.web.Client().Do(req)
		require.NoError(t, err)
		resp.Body.Close() // NB: a stream's body never ends on its own
		return resp.StatusCode
	}
	garbage := &http.Cookie{Name: f.srv.sessionCookieName(), Value: "planted"}
	proof := f.srv.sessionProof(page.Value)
	for _, path := range []string{"/api/v1/runs", "/api/v1/stream"} {
		for _, first := range []*http.Cookie{garbage, planted} {
			require.Equal(t, http.StatusOK, status(path, proof, first, page), "%s after %q", path, first.Value)
		}
		require.Equal(t, http.StatusUnauthorized, status(path, "", garbage, page), "%s without a proof", path)
		require.Equal(t, http.StatusUnauthorized, status(path, proof, garbage, planted),
			"%s: the proof's cookie is not sent", path)
	}
	// A client that sends more cookies than a browser would costs the server no more proofs than maxSessionCookies.
	var many []*http.Cookie
	for range maxSessionCookies - 1 {
		many = append(many, garbage)
	}
	require.Equal(t, http.StatusOK, status("/api/v1/runs", proof, append(many, page)...))
	require.Equal(t, http.StatusUnauthorized, status("/api/v1/runs", proof, append(many, garbage, page)...))

	req, err := http.NewRequest(http.MethodGet, f.web.URL+"/api/v1/runs", nil)
	require.NoError(t, err)
	req.AddCookie(garbage)
	f.withSession(req, page)
	read := make(chan string, 1)
	f.srv.reading = func(p principal) { read <- p.key }
	code, _ := f.send(req)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, keyCrewd, recv(t, read, "read of the page"), "the page's own session")
}

// TestCookiesPlantedOnEveryPathOfARouteDoNotShadowThePages: a server on another port of the host may set a
// crewlog_session of its own for each Path that path-matches a route (RFC 6265 §5.1.4: /api, /api/, …, the route's
// own path), and a Partitioned one beside each, which a browser keeps apart and sends too; the browser sends them
// all before the page's Path=/ one, the longest Path first. The server read only the first 8 cookies of the name: a
// worker that served a page the operator opened could plant 9 or more for the routes of its own run (its tasks, its
// mailbox, its jobs) and have the page's every read of them refused 401, signed out there while it lived. The
// page's session must still be the one its proof was made for, on every route.
func TestCookiesPlantedOnEveryPathOfARouteDoNotShadowThePages(t *testing.T) {
	f := newFixture(t, Options{Metrics: NewMetrics()})
	start, _ := f.srv.LoginURL()
	page := f.spendLink(start)
	for _, route := range everyRoute {
		t.Run(route, func(t *testing.T) {
			path, _, _ := strings.Cut(route, "?")
			var planted []string
			for i := 1; i < len(path); i++ {
				if path[i] == '/' {
					planted = append(planted, path[:i], path[:i+1])
				}
			}
			planted = append(planted, path)
			req, err := http.NewRequest(http.MethodGet, f.web.URL+route, nil)
			require.NoError(t, err)
			for _, p := range planted {
				for _, twin := range []string{"", "-partitioned"} {
					value := "planted-on" + strings.ReplaceAll(p, "/", "_") + twin
					req.AddCookie(&http.Cookie{Name: f.srv.sessionCookieName(), Value: value})
				}
			}
			f.withSession(req, page)
			resp, err := f.web.Client().Do(req)
			require.NoError(t, err)
			resp.Body.Close() // NB: a stream's body never ends on its own
			require.Equal(t, http.StatusOK, resp.StatusCode, "after %d planted cookies", 2*len(planted))
		})
	}
}

// TestALoginLinkOnlyFromTheUsersOwnNavigation: a page of another origin (a dev server a worker started, say) that
// opens a login link minted with the worker's read-only token would log the operator's browser into the worker's
// session: the cookie replaces the operator's own, the page then counts against the worker's limits, and it ends
// when the worker's token is revoked. So a link another origin's page opened (Sec-Fetch-Site same-site or
// cross-site) is refused and left unspent; the user's own navigation (none) and clients that send no such header
// spend it.
func TestALoginLinkOnlyFromTheUsersOwnNavigation(t *testing.T) {
	f := newFixture(t, Options{})
	open := func(link, site string) *http.Response {
		req, err := http.NewRequest(http.MethodGet, link, nil)
		require.NoError(t, err)
		if site != "" {
			req.Header.Set("Sec-Fetch-Site", site)
		}
		resp, err := noRedirect.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}
	for _, site := range []string{"same-site", "cross-site"} {
		link := f.mintLink(roToken)
		resp := open(link, site)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, "a link opened by another origin's page (%s)", site)
		require.Empty(t, resp.Cookies(), site)
		require.NotNil(t, f.spendLink(link), "the refused link is left unspent for the user to open (%s)", site)
	}
	for _, site := range []string{"", "none", "same-origin"} {
		resp := open(f.mintLink(roToken), site)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, "Sec-Fetch-Site %q", site)
		require.Len(t, resp.Cookies(), 1, "Sec-Fetch-Site %q", site)
	}
}

// TestARevokedTokensLoginsHoldNoPlace: the sessions and unspent links of a revoked token are refused, so they must
// not keep places in the bounded tables either: a login once the tables are full takes the place of a revoked
// token's session or link, never of another valid credential's, however recently the revoked token logged in.
func TestARevokedTokensLoginsHoldNoPlace(t *testing.T) {
	t.Run("sessions", func(t *testing.T) {
		const maxSessions = 2 * maxSessionsPerCredential
		clock := new(testClock).set(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
		f := newFixture(t, Options{MaxSessions: maxSessions, Now: clock.Now})
		const other = "crro_another-read-only-secret"
		f.tokens.set(other, true)
		login := func(tok string) *http.Cookie {
			clock.add(time.Second) // NB: each expires later than the one before
			c := f.spendLink(f.mintLink(tok))
			require.NotNil(t, c)
			return c
		}
		var kept []*http.Cookie
		for range maxSessionsPerCredential {
			kept = append(kept, login(other))
		}
		for range maxSessionsPerCredential {
			login(roToken) // the newest: the table is full
		}
		f.tokens.set(roToken, false)
		admin := login(adminToken)
		require.Equal(t, http.StatusOK, f.readsWith(admin))
		for i, c := range kept {
			require.Equal(t, http.StatusOK, f.readsWith(c), "session %d of a valid token was pushed out", i)
		}
	})
	t.Run("links", func(t *testing.T) {
		clock := new(testClock).set(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
		f := newFixture(t, Options{Now: clock.Now})
		mint := func(tok string) string {
			clock.add(time.Second)
			return f.mintLink(tok)
		}
		var kept []string
		for i := range maxLoginCodes/maxLoginCodesPerCredential - 1 {
			tok := fmt.Sprintf("crro_valid-%d", i)
			f.tokens.set(tok, true)
			for range maxLoginCodesPerCredential {
				kept = append(kept, mint(tok))
			}
		}
		for range maxLoginCodesPerCredential {
			mint(roToken) // the newest: the table is full
		}
		f.tokens.set(roToken, false)
		require.NotNil(t, f.spendLink(mint(adminToken)))
		for i, link := range kept {
			code := strings.TrimPrefix(link, f.web.URL+"/login?code=")
			_, ok := f.srv.codes.valid(digestOf(code), clock.Now())
			require.True(t, ok, "link %d of a valid token was pushed out", i)
		}
	})
	// NB: whether a read-only token is valid may take a read of its file, and every session's request takes the
	// set's lock: an add asks about each owner once, and never while it holds the lock.
	t.Run("each owner asked once, not under the lock", func(t *testing.T) {
		now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
		var ss *secrets
		asked := map[string]int{}
		revoked := map[string]bool{}
		ss = newSecrets(8, 4, func(owner string) bool {
			require.True(t, ss.mu.TryLock(), "%s asked about under the lock", owner)
			ss.mu.Unlock()
			asked[owner]++
			return !revoked[owner]
		})
		for i, owner := range []string{"a", "a", "a", "b", "b", "b", "c"} {
			ss.add(owner, now.Add(time.Duration(i+1)*time.Minute), now)
		}
		revoked["b"] = true
		clear(asked)
		ss.add("a", now.Add(time.Hour), now)
		require.Equal(t, map[string]int{"a": 1, "b": 1, "c": 1}, asked)
		held := map[string]int{}
		for _, e := range ss.m {
			held[e.owner]++
		}
		require.Equal(t, map[string]int{"a": 4, "c": 1}, held, "b's secrets are dropped, a's and c's kept")
	})
}

// TestTokensAtTheirShareCannotPushOutAnothersLogins: tokens that each keep the most links (or sessions) one
// credential may, and together fill the server's table, go on minting; another credential's link and session, one
// each, stay valid: a full table drops a secret of the credential that holds the most, not the one that expires
// first, which would be the other credential's as soon as the tokens' older ones had been replaced.
func TestTokensAtTheirShareCannotPushOutAnothersLogins(t *testing.T) {
	for _, tc := range []struct {
		name          string
		owners, share int
		maxSessions   int
		// login mints (and spends) a login of tok, and returns whether it still holds.
		login func(f *fixture, tok string) (holds func() bool)
		table func(f *fixture) *secrets
	}{
		{
			name: "links", owners: maxLoginCodes / maxLoginCodesPerCredential, share: maxLoginCodesPerCredential,
			login: func(f *fixture, tok string) func() bool {
				link := f.mintLink(tok)
				return func() bool { return f.spendLink(link) != nil }
			},
			table: func(f *fixture) *secrets { return f.srv.codes },
		},
		{
			name: "sessions", owners: 4, share: maxSessionsPerCredential, maxSessions: 4 * maxSessionsPerCredential,
			login: func(f *fixture, tok string) func() bool {
				c := f.spendLink(f.mintLink(tok))
				require.NotNil(f.t, c)
				return func() bool { return f.readsWith(c) == http.StatusOK }
			},
			table: func(f *fixture) *secrets { return f.srv.sessions },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := new(testClock).set(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
			f := newFixture(t, Options{MaxSessions: tc.maxSessions, Now: clock.Now})
			login := func(tok string) func() bool {
				clock.add(time.Second) // NB: each expires later than the one before
				return tc.login(f, tok)
			}
			var toks []string
			for i := range tc.owners {
				tok := fmt.Sprintf("crro_worker-%d", i)
				f.tokens.set(tok, true)
				toks = append(toks, tok)
			}
			fill := func() {
				for _, tok := range toks {
					for range tc.share {
						login(tok)
					}
				}
			}
			fill()
			admin := login(adminToken)
			fill()
			fill()
			require.Len(t, tc.table(f).m, tc.owners*tc.share)
			require.True(t, admin(), "the admin's was pushed out by tokens within their share")
		})
	}
}

// TestTheLinkCrewdPrintsExpires: the link crewd prints at start held a code valid until it was used or crewd
// stopped, so whoever read crewd's output (its journal, a log file) days later could still open an operator's
// session with it: unpaced, and revoked by no token. Now it is valid LoginCodeLifetime, as every link minted is;
// `crewctl dashboard` prints another.
func TestTheLinkCrewdPrintsExpires(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after time.Duration
		want  bool
	}{
		{"within its lifetime", LoginCodeLifetime - time.Second, true},
		{"at the end of its lifetime", LoginCodeLifetime, false},
		{"a day later", 24 * time.Hour, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := new(testClock).set(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
			f := newFixture(t, Options{Now: clock.Now})
			link, exp := f.srv.LoginURL()
			require.Equal(t, clock.Now().Add(LoginCodeLifetime), exp)
			clock.add(tc.after)
			require.Equal(t, tc.want, f.spendLink(link) != nil)
		})
	}
}
