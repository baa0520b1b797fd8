package httpapi

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTwoDashboardsOnOneHostKeepTheirSessions: a browser keeps cookies apart by host name, not by port, so two
// crewd on one host (two data directories, 127.0.0.1:7717 and :7718) shared the one crewlog_session, Path=/: signing
// in to one replaced the other's cookie, and that dashboard's page was refused 401, signed out, until its operator
// opened a new login link, which then signed out the first. Each listener's session cookie now has a name of its
// own, so the sessions of both, in one browser's jar (which, as browsers, ignores ports), stay valid.
func TestTwoDashboardsOnOneHostKeepTheirSessions(t *testing.T) {
	f := newFixture(t, Options{})
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar, CheckRedirect: noRedirect.CheckRedirect}
	type dashboard struct{ base, proof string }
	var dashboards []dashboard
	for range 2 {
		srv, err := New(Options{Engine: f.eng, Log: f.log, AdminDigest: digestOf(adminToken)})
		require.NoError(t, err)
		require.NoError(t, srv.Listen("127.0.0.1:0"))
		served := make(chan error, 1)
		go func() { served <- srv.Serve(context.Background()) }()
		t.Cleanup(func() {
			require.NoError(t, closeWithin(t, srv))
			require.NoError(t, recv(t, served, "return from Serve once the server closed"))
		})
		link, _ := srv.LoginURL()
		resp, err := browser.Get(link)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		proof, ok := strings.CutPrefix(resp.Header.Get("Location"), "/#"+proofParam+"=")
		require.True(t, ok, "%q", resp.Header.Get("Location"))
		dashboards = append(dashboards, dashboard{srv.BaseURL(), proof})
	}
	require.NotEqual(t, dashboards[0].base, dashboards[1].base)
	for i, d := range dashboards {
		req, err := http.NewRequest(http.MethodGet, d.base+"/api/v1/runs", nil)
		require.NoError(t, err)
		req.Header.Set(proofHeader, d.proof)
		resp, err := browser.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "dashboard %d (%s) after both sign-ins", i, d.base)
	}
}

// TestTheSessionCookieIsSecureWhenTheOperatorSaysSo: crewd serves plain HTTP, so its session cookie was Secure only
// on a request that came over TLS, which never happens: behind the TLS proxy the docs ask for with
// --http-allow-remote, the browser got a cookie it would also send over plain http. With Options.SecureCookie
// (crewd's --http-secure-cookie) it is Secure and named __Host-…, which browsers hold to Secure, Path=/ and no
// Domain; without, it is not, whatever X-Forwarded-Proto a client sends. Both are HttpOnly, SameSite=Strict, Path=/,
// host-only, for SessionLifetime, named by the listener's port, and open the session.
func TestTheSessionCookieIsSecureWhenTheOperatorSaysSo(t *testing.T) {
	for _, c := range []struct {
		name      string
		secure    bool
		forwarded string // X-Forwarded-Proto of the login's request
		prefix    string
	}{
		{name: "plain", prefix: "crewlog_session_"},
		{name: "plain, a client says https", forwarded: "https", prefix: "crewlog_session_"},
		{name: "secure", secure: true, prefix: "__Host-crewlog_session_"},
		{name: "secure, a client says http", secure: true, forwarded: "http", prefix: "__Host-crewlog_session_"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, Options{SecureCookie: c.secure})
			link, _ := f.srv.LoginURL()
			req, err := http.NewRequest(http.MethodGet, link, nil)
			require.NoError(t, err)
			if c.forwarded != "" {
				req.Header.Set("X-Forwarded-Proto", c.forwarded)
			}
			resp, err := noRedirect.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, http.StatusSeeOther, resp.StatusCode)
			require.Len(t, resp.Cookies(), 1)
			cookie := resp.Cookies()[0]
			port := f.web.Listener.Addr().(*net.TCPAddr).Port
			require.Equal(t, c.prefix+strconv.Itoa(port), cookie.Name)
			require.Equal(t, c.secure, cookie.Secure, "%s", resp.Header.Get("Set-Cookie"))
			require.True(t, cookie.HttpOnly)
			require.Equal(t, http.SameSiteStrictMode, cookie.SameSite)
			require.Equal(t, "/", cookie.Path)
			require.Empty(t, cookie.Domain, "host-only")
			require.Equal(t, int(SessionLifetime/time.Second), cookie.MaxAge)
			require.Equal(t, http.StatusOK, f.readsWith(cookie))
		})
	}
}

// TestASessionCookieSentOverTLSIsSecure: a login that came over TLS (crewd's listener behind nothing, or a test's
// TLS server) gets a Secure cookie even without Options.SecureCookie, since its browser reaches the server over https;
// one over plain http is Secure only when the operator says so.
func TestASessionCookieSentOverTLSIsSecure(t *testing.T) {
	for _, c := range []struct {
		name        string
		secure, tls bool
	}{
		{"plain", false, false},
		{"over TLS", false, true},
		{"secure", true, false},
		{"secure over TLS", true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, Options{SecureCookie: c.secure})
			req := httptest.NewRequest(http.MethodGet, "/login", nil)
			if c.tls {
				req.TLS = &tls.ConnectionState{}
			}
			cookie := f.srv.sessionCookie(req, "session")
			require.Equal(t, c.secure || c.tls, cookie.Secure)
			require.Equal(t, "session", cookie.Value)
		})
	}
}

// TestTheSessionCookieIsNamedByItsPort: the name is crewlog_session_PORT for a listener on PORT, crewlog_session on a
// Handler served by another listener (port not known: 0), and __Host- before either with Options.SecureCookie.
func TestTheSessionCookieIsNamedByItsPort(t *testing.T) {
	for _, c := range []struct {
		port   int
		secure bool
		want   string
	}{
		{0, false, "crewlog_session"},
		{0, true, "__Host-crewlog_session"},
		{1, false, "crewlog_session_1"},
		{7717, false, "crewlog_session_7717"},
		{7717, true, "__Host-crewlog_session_7717"},
	} {
		require.Equal(t, c.want, cookieNameFor(c.port, c.secure), "port %d, secure %v", c.port, c.secure)
	}
}
