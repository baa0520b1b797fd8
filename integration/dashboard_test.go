package integration

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// dashboardURL is the login link crewd printed at its last start.
func (d *daemon) dashboardURL(t *testing.T) string {
	for _, line := range d.printed {
		if u, ok := strings.CutPrefix(line, "crewd: dashboard "); ok {
			return u
		}
	}
	t.Fatalf("crewd printed no dashboard line: %q", d.printed)
	return ""
}

// TestDashboardOverHTTP: a real crewd serves the read-only API next to its socket: the printed login link gives
// the page a session cookie and its proof once; a read-only token from crewctl reads, and stops reading once
// revoked; a delegation decided over the socket appears on the live stream and in /metrics.
func TestDashboardOverHTTP(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	d := newDaemon(t)
	t.Cleanup(d.cleanup)
	d.start()
	login := d.dashboardURL(t)
	base := login[:strings.Index(login, "/login")]

	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	page := &http.Client{Jar: jar}
	resp, err := page.Get(login)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "the link lands on the page")
	require.Contains(t, string(body), "<html")
	proof, ok := strings.CutPrefix(resp.Request.URL.Fragment, "proof=")
	require.True(t, ok, "the page gets the session's proof in the fragment: %q", resp.Request.URL)
	readRuns := func(proof string) int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/runs", nil)
		if proof != "" {
			req.Header.Set("X-Crewlog-Proof", proof)
		}
		resp, err := page.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, readRuns(proof), "the session cookie with its proof reads the API")
	require.Equal(t, http.StatusUnauthorized, readRuns(""), "the session cookie alone reads nothing")
	resp, err = http.Get(login)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the printed code works once")

	tok := strings.TrimSpace(d.crewctl(t, "token", "create", "--read-only", "--name", "script"))
	get := func(path, token string) (int, []byte) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	code, _ := get("/api/v1/runs", tok)
	require.Equal(t, http.StatusOK, code)

	// Open a live stream, then delegate over the socket: the admission arrives on the stream.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/stream?type=delegate.admitted", nil)
	req.Header.Set("Authorization", "Bearer "+d.adminToken())
	stream, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer stream.Body.Close()
	lines := bufio.NewScanner(stream.Body)
	require.True(t, lines.Scan())
	require.Equal(t, "retry: 2000", lines.Text())
	c := newCrew(ctx, t, d, "P")
	worker := d.mustDial(ctx, c.workers["P"])
	var adm admitted
	require.NoError(t, worker.Call(ctx, "delegate.request", delegateParams(""), &adm))
	for lines.Scan() {
		if data, ok := strings.CutPrefix(lines.Text(), "data: "); ok && strings.Contains(data, "delegate.admitted") {
			var ev struct {
				Data struct {
					SubID string `json:"subId"`
				} `json:"data"`
			}
			require.NoError(t, json.Unmarshal([]byte(data), &ev))
			require.Equal(t, adm.GrandchildTaskRef, ev.Data.SubID)
			break
		}
	}
	require.NoError(t, lines.Err())

	code, b := get("/api/v1/runs/"+c.runID+"/delegations", tok)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, string(b), adm.GrandchildTaskRef)
	code, b = get("/metrics", tok)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, string(b), `crewlog_commands_total{method="delegate.request",outcome="admitted"} 1`)
	require.Contains(t, string(b), `crewlog_budget_tokens_granted{run="`+c.runID+`"}`)

	id := strings.Fields(d.crewctl(t, "token", "list"))[0]
	d.crewctl(t, "token", "revoke", id)
	require.Eventually(t, func() bool { code, _ := get("/api/v1/runs", tok); return code == http.StatusUnauthorized },
		time.Minute, 50*time.Millisecond, "crewd reads the token file again within a second")
}
