package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
)

// TestClientSizesAreBoundedWhereTheDocsSay: each size of a request that docs/dashboard-api.md bounds is taken at its
// bound and refused 400 bad-params one beyond it, before anything is read for it: a limit, a cursor, an id, a
// search, a type filter's count and each type's bytes, a job's page.
func TestClientSizesAreBoundedWhereTheDocsSay(t *testing.T) {
	f := newFixture(t, Options{})
	types := func(n, size int) string {
		q := make([]string, n)
		for i := range q {
			q[i] = "type=" + strings.Repeat("t", size)
		}
		return strings.Join(q, "&")
	}
	for _, tc := range []struct {
		name          string
		atBound, over string
		atBoundStatus int // the answer at the bound (an unknown run, a cursor no route handed out)
	}{
		{"limit", "/api/v1/runs?limit=1000", "/api/v1/runs?limit=1001", http.StatusOK},
		{"cursor", "/api/v1/runs?cursor=" + strings.Repeat("z", maxCursorLen),
			"/api/v1/runs?cursor=" + strings.Repeat("z", maxCursorLen+1), http.StatusBadRequest},
		{"run id", "/api/v1/runs/" + strings.Repeat("r", maxIDLen) + "/tasks",
			"/api/v1/runs/" + strings.Repeat("r", maxIDLen+1) + "/tasks", http.StatusNotFound},
		{"search", "/api/v1/runs?q=" + strings.Repeat("q", maxIDLen),
			"/api/v1/runs?q=" + strings.Repeat("q", maxIDLen+1), http.StatusOK},
		{"types of a page", budgetRun + "/events?" + types(broker.MaxTypeFilter, 1),
			budgetRun + "/events?" + types(broker.MaxTypeFilter+1, 1), http.StatusOK},
		{"a type's bytes", budgetRun + "/events?" + types(1, broker.MaxTypeLen),
			budgetRun + "/events?" + types(1, broker.MaxTypeLen+1), http.StatusOK},
		{"a job's page", livePath + "/jobs/" + liveJob + "?limit=500", livePath + "/jobs/" + liveJob + "?limit=501",
			http.StatusOK},
		{"a stream's run", "/api/v1/stream?run=" + strings.Repeat("r", maxIDLen),
			"/api/v1/stream?run=" + strings.Repeat("r", maxIDLen+1), http.StatusNotFound},
		{"types of a stream", "", "/api/v1/stream?" + types(broker.MaxTypeFilter+1, 1), 0},
		{"a stream's type's bytes", "", "/api/v1/stream?" + types(1, broker.MaxTypeLen+1), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.atBound != "" {
				status, m := f.get(tc.atBound)
				require.Equal(t, tc.atBoundStatus, status, "at the bound: %v", m)
				if status == http.StatusBadRequest {
					require.Equal(t, codeBadCursor, m["error"].(map[string]any)["code"], "at the bound: %v", m)
				}
			}
			f.fails(tc.over, http.StatusBadRequest, codeBadParams)
		})
	}
}

// TestCursorBoundIsInTheDocsUnit: a cursor is bounded in bytes of UTF-8, not in chars as the docs said: 33 chars of
// two bytes each are refused bad-params, 32 taken (and refused bad-cursor, as no route handed them out).
func TestCursorBoundIsInTheDocsUnit(t *testing.T) {
	f := newFixture(t, Options{})
	f.fails("/api/v1/runs?cursor="+strings.Repeat("é", maxCursorLen/2+1), http.StatusBadRequest, codeBadParams)
	f.fails("/api/v1/runs?cursor="+strings.Repeat("é", maxCursorLen/2), http.StatusBadRequest, codeBadCursor)
	doc, err := os.ReadFile("../../docs/dashboard-api.md")
	require.NoError(t, err)
	want := fmt.Sprintf("opaque, ≤ %d bytes)", maxCursorLen)
	require.True(t, strings.Contains(string(doc), want), "docs/dashboard-api.md's Paging says %q", want)
}

// TestDocsStateTheRequestSizes: the sizes TestClientSizesAreBoundedWhereTheDocsSay takes at their bound are the ones
// docs/dashboard-api.md states, in the unit the code counts, where the page named the cursor's and the task id's
// only.
func TestDocsStateTheRequestSizes(t *testing.T) {
	requireDocSays(t, "dashboard-api.md",
		fmt.Sprintf("and a search (`q`) are at most %d bytes", maxIDLen),
		fmt.Sprintf("a job id at most %d", commands.MaxJobIDChars),
		fmt.Sprintf("a task id at most %d chars", events.MaxIDChars),
		fmt.Sprintf("at most %d types of at most %d bytes each", broker.MaxTypeFilter, broker.MaxTypeLen),
	)
}

// requireDocSays requires each of says in docs/page, its lines joined and its runs of spaces made one, so that a
// sentence the page wraps is found as written on one line.
func requireDocSays(t *testing.T, page string, says ...string) {
	t.Helper()
	doc, err := os.ReadFile("../../docs/" + page)
	require.NoError(t, err)
	text := strings.Join(strings.Fields(string(doc)), " ")
	for _, want := range says {
		require.True(t, strings.Contains(text, want), "docs/%s says %q", page, want)
	}
}

// TestStreamsAreBoundedInAll: beyond MaxStreams open streams, every credential's together, the next is refused 429
// too-many-streams whatever its credential.
func TestStreamsAreBoundedInAll(t *testing.T) {
	f := newFixture(t, Options{MaxStreams: 2})
	admin := f.openStream("/api/v1/stream", nil)
	require.Equal(t, "hello", next(t, admin).event)
	ro := f.openStream("/api/v1/stream", http.Header{"Authorization": {"Bearer " + roToken}})
	require.Equal(t, "hello", next(t, ro).event)
	msg := f.fails("/api/v1/stream", http.StatusTooManyRequests, codeTooManyStreams)
	require.Contains(t, msg, "limit 2")
	require.Equal(t, 2, f.srv.streams.open())
}

// TestSecurityDocStatesTheDashboardsBounds: the numbers docs/security.md gives for the dashboard — how long a login
// code and a session live, how many sessions and links a credential and all of them keep, the reads a credential
// has in progress and waiting, the connections, how long a new one may stay silent, how long a client may take to
// send a request's header and a kept-alive connection may stay idle, and how long a client may take to read its
// answer — are the ones the code enforces (their tests hold the code to them), so the page and the code
// cannot drift apart unnoticed.
func TestSecurityDocStatesTheDashboardsBounds(t *testing.T) {
	require.Equal(t, time.Second, DefaultConnGrace, "the page says a second")
	requireDocSays(t, "security.md",
		fmt.Sprintf("within %d minutes: the code expires then", int(LoginCodeLifetime/time.Minute)),
		fmt.Sprintf("sessions live in crewd's memory, %d days at most", int(SessionLifetime/(24*time.Hour))),
		fmt.Sprintf("(at most %d sessions and %d links kept each)", maxSessionsPerCredential,
			maxLoginCodesPerCredential),
		fmt.Sprintf("when the %s sessions or %d links are all taken", thousands(DefaultMaxSessions), maxLoginCodes),
		fmt.Sprintf("requests in progress per credential (%d; up to %d more wait their turn, the next is refused "+
			"`429 too-many-reads`)", maxReadsPerCredential, maxWaitingReadsPerCredential),
		fmt.Sprintf("Connections are bounded too (%s)", thousands(DefaultMaxConns)),
		"for more than a second sent no request",
		fmt.Sprintf("a request's line and headers must come within %d s (`ReadHeaderTimeout`), and a kept-alive "+
			"connection idle for %d min is closed (`IdleTimeout`)", int(readHeaderTimeout/time.Second),
			int(idleTimeout/time.Minute)),
		fmt.Sprintf("within %d s (each %d KiB of an answer and of each write of a stream has %d s to be taken)",
			int(writeTimeout/time.Second), writePieceBytes>>10, int(writeTimeout/time.Second)),
	)
}

// thousands is n as the docs write it: 1,024.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// TestARequestsHeadersAreBounded: a request whose line and headers pass maxHeaderBytes and net/http's slack is
// refused 431 before any route reads it; one of half the bound is served. The slack is 4 KiB on a new connection and
// 8 KiB on one kept alive (net/http's reader holds up to 4 KiB of what follows a request when it resets its limit), so
// each case runs on both.
func TestARequestsHeadersAreBounded(t *testing.T) {
	f := newFixture(t, Options{})
	_, base := listening(t, f)
	get := func(c *http.Client, pad int) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, base+"/api/v1/runs", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		req.Header.Set("X-Pad", strings.Repeat("p", pad))
		resp, err := c.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		keptAlive bool
		pad       int
		status    int
	}{
		{false, maxHeaderBytes / 2, http.StatusOK},
		{false, maxHeaderBytes + 4<<10 + 1, http.StatusRequestHeaderFieldsTooLarge},
		{true, maxHeaderBytes / 2, http.StatusOK},
		{true, maxHeaderBytes + 8<<10 + 1, http.StatusRequestHeaderFieldsTooLarge},
	} {
		tr := &http.Transport{DisableKeepAlives: !tc.keptAlive}
		c := &http.Client{Transport: tr}
		if tc.keptAlive {
			require.Equal(t, http.StatusOK, get(c, 0))
		}
		require.Equal(t, tc.status, get(c, tc.pad), "headers of %d bytes, kept alive %v", tc.pad, tc.keptAlive)
		tr.CloseIdleConnections()
	}
}
