package httpapi

import (
	"context"
	"net"
	"net/http"
	"net/http/cookiejar"
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
			require.NoError(t, srv.Close())
			require.NoError(t, <-served)
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
