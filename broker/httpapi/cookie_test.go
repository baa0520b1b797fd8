package httpapi

import (
	"context"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"

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
