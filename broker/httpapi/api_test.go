package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/broker"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
)

var (
	budgetRun = "/api/v1/runs/" + audittest.RunBudget
	livePath  = "/api/v1/runs/" + liveRun
)

// pagedRoutes are the lists that page by cursor, with the key holding their items.
var pagedRoutes = []struct{ path, key string }{
	{"/api/v1/runs", "runs"},
	{budgetRun + "/tasks", "tasks"},
	{budgetRun + "/delegations", "delegations"},
	{budgetRun + "/ledger", "accounts"},
	{budgetRun + "/ledger?taskId=01_build", "reservations"},
	{budgetRun + "/mailbox?taskId=01_build", "messages"},
	{livePath + "/asks", "asks"},
	{livePath + "/jobs", "jobs"},
	{livePath + "/jobs/" + liveJob, "requests"},
	{livePath + "/credentials", "credentials"},
	{budgetRun + "/events", "events"},
}

// everyRoute is one GET of each route, for the refusals every route must give.
var everyRoute = []string{
	"/api/v1/runs", budgetRun, budgetRun + "/tasks", budgetRun + "/delegations", budgetRun + "/ledger",
	budgetRun + "/mailbox", budgetRun + "/asks", budgetRun + "/credentials", budgetRun + "/events",
	budgetRun + "/jobs", livePath + "/jobs/" + liveJob,
	budgetRun + "/state?at=5", "/api/v1/slots", "/api/v1/events/3/explain", "/api/v1/stream", "/metrics",
}

func with(path, query string) string {
	if strings.Contains(path, "?") {
		return path + "&" + query
	}
	return path + "?" + query
}

func TestRouteShapes(t *testing.T) {
	f := newFixture(t, Options{Metrics: NewMetrics()})

	runs := f.ok("/api/v1/runs")["runs"].([]any)
	require.Len(t, runs, 3)
	first := runs[0].(map[string]any)
	for _, k := range []string{"runId", "team", "goal", "status", "budgetUsed", "createdAt", "usage", "activeDelegations"} {
		require.Contains(t, first, k)
	}
	require.Equal(t, audittest.RunBudget, first["runId"])
	require.Equal(t, 100000.0, first["budgetTotal"])

	run := f.ok(budgetRun)
	require.Equal(t, "completed", run["status"])
	require.Equal(t, float64(head(f)), run["position"])

	tasks := f.ok(budgetRun + "/tasks")
	require.Equal(t, false, tasks["hasMore"])
	kinds := map[string]string{}
	for _, it := range tasks["tasks"].([]any) {
		task := it.(map[string]any)
		kinds[task["id"].(string)] = task["kind"].(string)
	}
	require.Equal(t, "workflow", kinds["01_build"])
	require.Equal(t, "shadow", kinds["gc-00000001"], "shadow tasks are listed, marked")

	dels := f.ok(budgetRun + "/delegations")["delegations"].([]any)
	d := dels[0].(map[string]any)
	require.Equal(t, "gc-00000001", d["subId"])
	require.Equal(t, "completed", d["status"])
	require.Equal(t, false, d["holdsSlot"])

	acc := f.ok(budgetRun + "/ledger")["accounts"].([]any)[0].(map[string]any)
	require.Equal(t, "01_build", acc["taskId"])
	require.Equal(t, acc["tokensGranted"].(float64)-acc["tokensSpent"].(float64), acc["remaining"])
	require.NotContains(t, acc, "reservations", "the list leaves the history out")
	hist := f.ok(budgetRun + "/ledger?taskId=01_build")
	require.NotEmpty(t, hist["reservations"])
	require.NotEmpty(t, hist["charges"], "01_build's first delegation used more than it reserved")
	f.fails(budgetRun+"/ledger?taskId=nobody", http.StatusNotFound, codeNotFound)
	// An account's history names its task: taskId given empty is a bad request, not a task without an account.
	msg := f.fails(budgetRun+"/ledger?taskId=", http.StatusBadRequest, codeBadParams)
	require.Contains(t, msg, "taskId must not be empty")

	msgs := f.ok(budgetRun + "/mailbox?taskId=01_build")["messages"].([]any)
	require.NotEmpty(t, msgs)
	require.Contains(t, msgs[0].(map[string]any), "kind")

	creds := f.ok(budgetRun + "/credentials")["credentials"].([]any)
	require.Empty(t, creds, "the scenario issues no credential")

	evs := f.ok(budgetRun + "/events?type=delegate.rejected")["events"].([]any)
	require.Len(t, evs, 4)
	ev := evs[0].(map[string]any)
	require.Equal(t, "delegate.rejected", ev["type"])
	require.Equal(t, "slots-exhausted", ev["data"].(map[string]any)["reason"])
	require.Contains(t, ev["meaning"], "slots-exhausted")
	require.Contains(t, ev["metadata"], "position")

	slots := f.ok("/api/v1/slots")
	require.Equal(t, 3.0, slots["capacity"])
	require.Equal(t, []any{}, slots["holders"])
}

// TestJobShapes: the list and the job are the socket's query.jobs and query.job answers with the limits in force;
// a refused call shows its reason; the nonce's digest is never shown.
func TestJobShapes(t *testing.T) {
	f := newFixture(t, Options{})
	jobs := f.ok(livePath + "/jobs")
	require.Equal(t, 1.0, jobs["total"])
	j := jobs["jobs"].([]any)[0].(map[string]any)
	require.Equal(t, liveJob, j["jobId"])
	require.Equal(t, "02_help", j["taskId"])
	require.Equal(t, "running", j["status"])
	require.Equal(t, 1.0, j["generation"])
	require.Equal(t, true, j["leaseActive"])
	require.Equal(t, "call-"+liveJob, j["rootToolCallId"])
	require.Equal(t, 1.0, j["inFlight"])
	require.Equal(t, map[string]any{"maxInFlight": 32.0, "maxRequests": 4096.0, "revokedRoots": 4096.0}, j["limits"])
	require.NotContains(t, j, "grant", "the list leaves the grant out")

	job := f.ok(livePath + "/jobs/" + liveJob)
	for k, v := range j {
		require.Equal(t, v, job[k], k)
	}
	grant := job["grant"].([]any)
	require.Len(t, grant, 1)
	require.Equal(t, "read", grant[0].(map[string]any)["name"])
	require.Len(t, grant[0].(map[string]any)["fingerprint"], 64)
	require.Equal(t, 0.0, job["revokedRoots"])
	require.Equal(t, false, job["saturated"])
	require.Equal(t, false, job["hasMore"])
	reasons := map[string]string{}
	for _, it := range job["requests"].([]any) {
		q := it.(map[string]any)
		reasons[q["requestId"].(string)] = fmt.Sprint(q["state"], "/", q["reason"])
	}
	require.Equal(t, "admitted/<nil>", reasons["r1"])
	require.Equal(t, "rejected/not-granted", reasons["r2"])

	body := fmt.Sprint(jobs, job, f.ok(livePath+"/events?type=job.created"))
	require.NotContains(t, body, commands.SecretDigest("nonce-"+liveJob), "no answer shows the nonce's digest")
	require.Empty(t, f.ok(budgetRun + "/jobs")["jobs"], "a run without jobs lists none")

	for _, q := range []string{"limit=0", "limit=501", "limit=x", "bogus=1"} {
		f.fails(livePath+"/jobs/"+liveJob+"?"+q, http.StatusBadRequest, codeBadParams)
	}
	f.fails(livePath+"/jobs/"+liveJob+"?cursor=-1", http.StatusBadRequest, codeBadCursor)
	f.fails(livePath+"/jobs/"+strings.Repeat("j", commands.MaxJobIDChars+1), http.StatusBadRequest, codeBadParams)
}

// TestJobPagesByCursor: the job's calls page by the socket's cursor: one a page in the order their ids were first
// seen, the job's own fields beside each; the cursor at the last call gives an empty page, one past it is refused.
func TestJobPagesByCursor(t *testing.T) {
	f := newFixture(t, Options{})
	whole := f.ok(livePath + "/jobs/" + liveJob)
	calls := whole["requests"].([]any)
	require.Len(t, calls, 2)
	fields := func(m map[string]any) map[string]any {
		out := maps.Clone(m)
		for _, k := range []string{"requests", "nextCursor", "hasMore"} {
			delete(out, k)
		}
		return out
	}
	for i, want := range []struct {
		next    string
		hasMore bool
	}{{"1", true}, {"", false}} {
		pg := f.ok(fmt.Sprintf("%s/jobs/%s?limit=1&cursor=%d", livePath, liveJob, i))
		require.Equal(t, []any{calls[i]}, pg["requests"], "page %d", i)
		require.Equal(t, fields(whole), fields(pg), "page %d", i)
		require.Equal(t, want.hasMore, pg["hasMore"], "page %d", i)
		if want.next == "" {
			require.NotContains(t, pg, "nextCursor", "page %d", i)
		} else {
			require.Equal(t, want.next, pg["nextCursor"], "page %d", i)
		}
	}
	end := f.ok(livePath + "/jobs/" + liveJob + "?cursor=2")
	require.Equal(t, []any{}, end["requests"], "the cursor at the last call: an empty page")
	require.Equal(t, false, end["hasMore"])
	f.fails(livePath+"/jobs/"+liveJob+"?cursor=3", http.StatusBadRequest, codeBadCursor)
}

// TestCredentialsShowWhoNeverDigest: issued and revoked with their actors, the task's status, no digest.
func TestCredentialsShowWhoNeverDigest(t *testing.T) {
	f := newFixture(t, Options{})
	digest := digestOf("tok-01_lead")
	f.do(audittest.Admin, &commands.CredentialRevoke{RunID: liveRun, TaskID: "01_lead", Reason: "rotated"})
	body := f.ok("/api/v1/runs/" + liveRun + "/credentials")
	creds := body["credentials"].([]any)
	require.Len(t, creds, len(liveTasks))
	c := creds[0].(map[string]any)
	require.Equal(t, "01_lead", c["key"])
	require.Equal(t, "orchestrator", c["issuedBy"])
	require.Equal(t, true, c["revoked"])
	require.Equal(t, "admin", c["revokedBy"])
	require.Equal(t, "rotated", c["revokedReason"])
	require.Equal(t, "running", c["taskStatus"], "its question closed with the revocation, and it resumed")
	require.Equal(t, false, creds[1].(map[string]any)["revoked"])
	require.NotContains(t, creds[1], "revokedBy")
	require.NotContains(t, fmt.Sprint(body), digest)
	evs := f.ok("/api/v1/runs/" + liveRun + "/events?type=credential.issued")
	require.NotContains(t, fmt.Sprint(evs), digest, "events never carry a digest either")
}

// TestPagingVisitsEveryItemOnce pages every list one item at a time and compares with one big page.
func TestPagingVisitsEveryItemOnce(t *testing.T) {
	f := newFixture(t, Options{})
	for _, r := range pagedRoutes {
		t.Run(r.path, func(t *testing.T) {
			all := f.ok(with(r.path, "limit=500")) // the largest page every list allows
			require.Equal(t, false, all["hasMore"])
			want := all[r.key].([]any)
			require.NotEmpty(t, want, "the fixture has items here")
			var got []any
			cursor := ""
			for pages := 0; ; pages++ {
				require.Less(t, pages, 1000)
				q := "limit=1"
				if cursor != "" {
					q += "&cursor=" + url.QueryEscape(cursor)
				}
				page := f.ok(with(r.path, q))
				items := page[r.key].([]any)
				got = append(got, items...)
				if page["hasMore"] != true {
					require.NotContains(t, page, "nextCursor")
					break
				}
				cursor = page["nextCursor"].(string)
			}
			if r.key == "reservations" { // the history pages over reservations then charges
				return
			}
			require.Equal(t, want, got)
		})
	}
}

// TestPagesWithoutALimitHoldAHundredItems: a page asked for without limit holds 100 items, as
// docs/dashboard-api.md says of the lists and of a job's calls, and says there is more.
func TestPagesWithoutALimitHoldAHundredItems(t *testing.T) {
	f := newFixture(t, Options{})
	const n = 101
	var reqs []commands.Request
	for i := range n {
		reqs = append(reqs,
			commands.Request{Actor: audittest.Admin, Command: &commands.RunCreate{RunID: fmt.Sprintf("paged-%03d", i),
				Team: "paged", Goal: "wait", Cwd: "/srv/paged"}},
			commands.Request{Actor: audittest.Orchestrator, Command: &commands.MessageSend{RunID: liveRun,
				To: []string{"01_lead"}, Body: fmt.Sprint("m", i)}})
	}
	f.admitAll(reqs)
	nonce := commands.SecretDigest("nonce-" + liveJob)
	for i := range n {
		// A call of a tool not granted is refused and listed: a job's calls of any number, none in flight.
		r := f.do(audittest.Worker("02_help"), &commands.ProxyRequest{RunID: liveRun, TaskID: "02_help", JobID: liveJob,
			RequestID: fmt.Sprint("x", i), RequestIDChars: len(fmt.Sprint("x", i)), NonceDigest: nonce, Tool: "bash",
			Args: json.RawMessage(`{}`)})
		require.NotNil(t, r.Rejected, "call %d", i)
	}
	for _, tc := range []struct{ path, key string }{
		{"/api/v1/runs", "runs"},
		{livePath + "/events", "events"},
		{livePath + "/mailbox?taskId=01_lead", "messages"},
		{livePath + "/jobs/" + liveJob, "requests"},
	} {
		t.Run(tc.key, func(t *testing.T) {
			page := f.ok(tc.path)
			require.Len(t, page[tc.key], 100)
			require.Equal(t, true, page["hasMore"])
		})
	}
}

func TestBadCursorIs400(t *testing.T) {
	f := newFixture(t, Options{})
	for _, r := range pagedRoutes {
		for _, c := range []string{"zz!", "99999"} {
			if r.key == "events" && c == "99999" {
				continue // a position past the head is a valid, empty page
			}
			msg := f.fails(with(r.path, "cursor="+url.QueryEscape(c)), http.StatusBadRequest, codeBadCursor)
			require.Contains(t, msg, c, r.path)
			require.Contains(t, msg, "start again without cursor")
		}
	}
	for _, q := range []string{"limit=0", "limit=1001", "limit=x", "newest=maybe", "status=sleeping", "bogus=1", "limit=1&limit=2"} {
		f.fails("/api/v1/runs?"+q, http.StatusBadRequest, codeBadParams)
	}
	f.fails(budgetRun+"/state", http.StatusBadRequest, codeBadParams)
	f.fails(budgetRun+"/state?at=yesterday", http.StatusBadRequest, codeBadParams)
	f.fails("/api/v1/events/x/explain", http.StatusBadRequest, codeBadParams)
	f.fails("/api/v1/stream?after=x", http.StatusBadRequest, codeBadParams)
}

func TestNotFound(t *testing.T) {
	f := newFixture(t, Options{})
	for _, p := range []string{"/api/v1/runs/nope", "/api/v1/runs/nope/tasks", "/api/v1/runs/nope/events",
		"/api/v1/runs/nope/jobs", "/api/v1/runs/nope/jobs/" + liveJob, livePath + "/jobs/nojob", budgetRun + "/jobs/" + liveJob,
		"/api/v1/runs/nope/credentials", "/api/v1/runs/nope/state?at=5", "/api/v1/stream?run=nope",
		"/api/v1/nothing", fmt.Sprintf("/api/v1/events/%d/explain", head(f)+1), budgetRun + "/state?at=0"} {
		f.fails(p, http.StatusNotFound, codeNotFound)
	}
}

// TestTargetsThatAreNotPaths: a request target that is not a path ("GET *", CONNECT's host:port) reaches the
// handler; it names no route, and is answered so in the API's error shape, not in the mux's plain text.
func TestTargetsThatAreNotPaths(t *testing.T) {
	f := newFixture(t, Options{})
	for _, c := range []struct{ method, target string }{
		{http.MethodGet, "*"}, {http.MethodPost, "*"}, {http.MethodConnect, "127.0.0.1:7717"},
	} {
		req := httptest.NewRequest(c.method, c.target, nil)
		req.Host = "127.0.0.1:7717"
		req.Header.Set("Authorization", "Bearer "+adminToken)
		rec := httptest.NewRecorder()
		f.srv.Handler().ServeHTTP(rec, req)
		require.Equal(t, http.StatusNotFound, rec.Code, "%s %s", c.method, c.target)
		var m errorBody
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &m), "%s %s: %s", c.method, c.target, rec.Body)
		require.Equal(t, codeNotFound, m.Error.Code)
	}
}

// TestMethodNotAllowedNamesTheRoutesMethods: a 405 says in Allow which methods its route answers (RFC 9110 §15.5.6):
// GET and HEAD on the read routes, the probes (a CONNECT among the others: a 2xx to it made Go 1.26.8's server read a
// tunnel as requests, GO-2026-6613) and the page's files, GET alone on the stream (a HEAD would open it for nobody)
// and on /login (which spends a code), POST alone on /api/v1/login.
func TestMethodNotAllowedNamesTheRoutesMethods(t *testing.T) {
	f := newFixture(t, Options{Metrics: NewMetrics()})
	type refusal struct{ method, path, allow string }
	var cases []refusal
	for _, p := range everyRoute {
		if p != "/api/v1/stream" {
			cases = append(cases, refusal{http.MethodPost, p, "GET, HEAD"},
				refusal{http.MethodDelete, p, "GET, HEAD"})
		}
	}
	cases = append(cases,
		refusal{http.MethodPost, "/api/v1/stream", "GET"}, refusal{http.MethodHead, "/api/v1/stream", "GET"},
		refusal{http.MethodPost, "/login", "GET"}, refusal{http.MethodHead, "/login", "GET"},
		refusal{http.MethodGet, "/api/v1/login", "POST"}, refusal{http.MethodHead, "/api/v1/login", "POST"},
		refusal{http.MethodPost, "/", "GET, HEAD"}, refusal{http.MethodPut, "/app.js", "GET, HEAD"},
		refusal{http.MethodPost, "/healthz", "GET, HEAD"}, refusal{http.MethodConnect, "/healthz", "GET, HEAD"},
		refusal{http.MethodDelete, "/readyz", "GET, HEAD"}, refusal{http.MethodConnect, "/readyz", "GET, HEAD"},
	)
	for _, c := range cases {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			req := httptest.NewRequest(c.method, c.path, nil)
			req.Host = "127.0.0.1:7717"
			req.Header.Set("Authorization", "Bearer "+adminToken)
			rec := httptest.NewRecorder()
			f.srv.Handler().ServeHTTP(rec, req)
			require.Equal(t, http.StatusMethodNotAllowed, rec.Code, "body %s", rec.Body)
			require.Equal(t, c.allow, rec.Header().Get("Allow"))
			var m errorBody
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &m), "body %s", rec.Body)
			require.Equal(t, codeMethod, m.Error.Code)
		})
	}
}

func TestAuthRefusals(t *testing.T) {
	f := newFixture(t, Options{Metrics: NewMetrics()})
	for _, p := range everyRoute {
		code, m := f.getAs(p, "")
		require.Equal(t, http.StatusUnauthorized, code, p)
		require.Equal(t, codeAuth, m["error"].(map[string]any)["code"], p)
		for _, bad := range []string{"Bearer wrong", "Basic " + adminToken, "Bearer ", "Bearer " + strings.Repeat("x", 300)} {
			code, _ = f.getAs(p, bad)
			require.Equal(t, http.StatusUnauthorized, code, "%s with %q", p, bad)
		}
	}
	// A read-only token reads; revoked, it is refused at its next request.
	code, _ := f.getAs("/api/v1/runs", "Bearer "+roToken)
	require.Equal(t, http.StatusOK, code)
	f.tokens.set(roToken, false)
	code, _ = f.getAs("/api/v1/runs", "Bearer "+roToken)
	require.Equal(t, http.StatusUnauthorized, code)

	// The API is read-only: no route takes another method.
	for _, p := range everyRoute {
		req, _ := http.NewRequest(http.MethodPost, f.web.URL+p, nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		code, m := f.send(req)
		require.Equal(t, http.StatusMethodNotAllowed, code, p)
		require.Equal(t, codeMethod, m["error"].(map[string]any)["code"])
	}

	// DNS rebinding: a page of another site that resolves its name to 127.0.0.1 sends its own Host.
	req, _ := http.NewRequest(http.MethodGet, f.web.URL+"/api/v1/runs", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Host = "evil.example:80"
	code, m := f.send(req)
	require.Equal(t, http.StatusForbidden, code)
	require.Equal(t, codeForbidden, m["error"].(map[string]any)["code"])
	req.Host = "localhost:7717"
	code, _ = f.send(req)
	require.Equal(t, http.StatusOK, code)
}

// TestLoginCodeOnceThenSessionCookie: the printed link's code is spent by its first use and sets an HttpOnly,
// SameSite=Strict session cookie that then authenticates the page; only a bearer can mint another link.
func TestLoginCodeOnceThenSessionCookie(t *testing.T) {
	f := newFixture(t, Options{})
	link, _ := f.srv.LoginURL()
	require.True(t, strings.HasPrefix(link, f.web.URL+"/login?code="))
	resp, err := noRedirect.Get(link)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	cookies := resp.Cookies()
	require.Len(t, cookies, 1)
	c := cookies[0]
	require.Equal(t, "/#proof="+f.srv.sessionProof(c.Value), resp.Header.Get("Location"),
		"the page gets the session's proof in the fragment, which no server is sent")
	require.Equal(t, f.srv.sessionCookieName(), c.Name)
	require.True(t, c.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, c.SameSite)
	require.Equal(t, "/", c.Path)

	resp, err = noRedirect.Get(link)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a login code works once")
	require.Empty(t, resp.Cookies())

	req, _ := http.NewRequest(http.MethodGet, f.web.URL+"/api/v1/runs", nil)
	f.withSession(req, c)
	code, _ := f.send(req)
	require.Equal(t, http.StatusOK, code, "the session cookie reads the API")
	req, _ = http.NewRequest(http.MethodGet, f.web.URL+"/api/v1/runs", nil)
	f.withSession(req, &http.Cookie{Name: f.srv.sessionCookieName(), Value: "forged"})
	code, _ = f.send(req)
	require.Equal(t, http.StatusUnauthorized, code)

	// A session cannot mint a login link; a bearer can, and that link works once.
	req, _ = http.NewRequest(http.MethodPost, f.web.URL+"/api/v1/login", nil)
	f.withSession(req, c)
	code, _ = f.send(req)
	require.Equal(t, http.StatusForbidden, code)
	req, _ = http.NewRequest(http.MethodPost, f.web.URL+"/api/v1/login", nil)
	req.Header.Set("Authorization", "Bearer "+roToken)
	code, m := f.send(req)
	require.Equal(t, http.StatusOK, code)
	resp, err = noRedirect.Get(m["url"].(string))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
}

// TestSessionsExpire: a session older than SessionLifetime, and a minted code older than LoginCodeLifetime, are
// refused.
func TestSessionsExpire(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	f := newFixture(t, Options{Now: func() time.Time { return clock() }})
	sess := digestOf(f.srv.sessions.add(keyCrewd, now.Add(SessionLifetime), now))
	link, _ := f.srv.LoginURL()
	code := strings.TrimPrefix(link, f.web.URL+"/login?code=")
	_, ok := f.srv.sessions.valid(sess, now.Add(SessionLifetime-time.Second))
	require.True(t, ok)
	_, ok = f.srv.sessions.valid(sess, now.Add(SessionLifetime))
	require.False(t, ok)
	_, ok = f.srv.codes.spend(code, now.Add(LoginCodeLifetime))
	require.False(t, ok)
}

// TestASecretWithoutExpiryIsNeverValid: a secret added with a zero expiry never expired, a handling every code
// and session once minted without one relied on and none does now: a code minted so by mistake would open a session
// until used or crewd stopped. A secret is now valid only before its expiry, and a zero one has passed.
func TestASecretWithoutExpiryIsNeverValid(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	ss := newSecrets(3, 3, func(string) bool { return true })
	sec := ss.add(keyAdmin, time.Time{}, now)
	_, ok := ss.valid(digestOf(sec), now)
	require.False(t, ok, "valid")
	sec = ss.add(keyAdmin, time.Time{}, now)
	_, ok = ss.spend(sec, now)
	require.False(t, ok, "spent")
}

func TestSecretsAreBounded(t *testing.T) {
	now := time.Now()
	ss := newSecrets(3, 3, func(string) bool { return true })
	var all []string
	for i := 0; i < 10; i++ {
		all = append(all, ss.add(keyAdmin, now.Add(time.Duration(i)*time.Minute), now))
	}
	require.Len(t, ss.m, 3)
	for i, s := range all {
		_, ok := ss.valid(digestOf(s), now)
		require.Equal(t, i >= 7, ok, "the newest 3 are kept (%d)", i)
	}
}

func TestRunsFilterAndSearch(t *testing.T) {
	f := newFixture(t, Options{})
	ids := func(m map[string]any) []string {
		var out []string
		for _, r := range m["runs"].([]any) {
			out = append(out, r.(map[string]any)["runId"].(string))
		}
		return out
	}
	require.Equal(t, []string{liveRun}, ids(f.ok("/api/v1/runs?status=running")))
	require.Equal(t, []string{audittest.RunUnlimited}, ids(f.ok("/api/v1/runs?q=TRIAGE")))
	require.Equal(t, []string{audittest.RunBudget, audittest.RunUnlimited}, ids(f.ok("/api/v1/runs?status=completed&status=cancelled")))
	require.Equal(t, liveRun, ids(f.ok("/api/v1/runs?newest=true"))[0])
	// A search pages too.
	p1 := f.ok("/api/v1/runs?q=team_&limit=2")
	require.Len(t, ids(p1), 2)
	p2 := f.ok("/api/v1/runs?q=team_&limit=2&cursor=" + p1["nextCursor"].(string))
	require.Len(t, ids(p2), 1)
}

// TestRunsFilterLooksAtBoundedRuns: a page of runs looks at most at maxSearchScan runs, whatever filters it, so a
// status that matches few of many runs (a search among them too) ends early with hasMore and a cursor, rather than
// looking at every run ever created in one read; the pages together hold every run the filter matches.
func TestRunsFilterLooksAtBoundedRuns(t *testing.T) {
	f := newFixture(t, Options{})
	reqs := make([]commands.Request, maxSearchScan+1)
	for i := range reqs {
		reqs[i] = commands.Request{Actor: audittest.Admin, Command: &commands.RunCreate{RunID: fmt.Sprintf("bulk-%05d", i),
			Team: "bulk", Goal: "wait", Cwd: "/srv/bulk"}}
	}
	f.admitAll(reqs)
	for _, q := range []string{"status=running", "status=running&q=live", "status=running&newest=true"} {
		first := f.ok("/api/v1/runs?" + q)
		require.Equal(t, true, first["hasMore"], q)
		var got []any
		cursor := ""
		for pages := 0; ; pages++ {
			require.Less(t, pages, 10, q)
			query := q
			if cursor != "" {
				query += "&cursor=" + cursor
			}
			page := f.ok("/api/v1/runs?" + query)
			got = append(got, page["runs"].([]any)...)
			if page["hasMore"] != true {
				break
			}
			cursor = page["nextCursor"].(string)
		}
		require.Len(t, got, 1, q)
		require.Equal(t, liveRun, got[0].(map[string]any)["runId"], q)
	}
}

// TestASearchReadsTheRunsInChunks: a search (q) read the runs a page's limit at a time, so a search of limit=1 that
// matched none of 5,000 runs read the runs 5,000 times, a run a read, each read of the engine's state listing and
// sorting every run it holds in memory: thousands of times the work of the same search at limit=100. A search now
// reads up to 500 runs a read whatever its limit, and a page its limit cuts short reads again only up to its last
// run, so that its cursor names the next; the pages together still hold every match, once, in order.
func TestASearchReadsTheRunsInChunks(t *testing.T) {
	f := newFixture(t, Options{})
	const runs = 2*searchChunk + 100
	reqs := make([]commands.Request, runs)
	for i := range reqs {
		team := "bulk"
		if i%300 == 0 {
			team = "Needle"
		}
		reqs[i] = commands.Request{Actor: audittest.Admin, Command: &commands.RunCreate{RunID: fmt.Sprintf("bulk-%05d", i),
			Team: team, Goal: "wait", Cwd: "/srv/bulk"}}
	}
	f.admitAll(reqs)
	var reads atomic.Int64
	f.srv.searching = func() { reads.Add(1) }
	page := f.ok("/api/v1/runs?q=no-such-run&limit=1")
	require.Empty(t, page["runs"])
	require.LessOrEqual(t, reads.Load(), int64(runs/searchChunk+2), "the runs read in chunks, not a run a read")

	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10)
		reads.Store(0)
		page := f.ok("/api/v1/runs?q=NEEDLE&limit=1" + cursor)
		require.LessOrEqual(t, reads.Load(), int64(runs/searchChunk+3), "the runs read in chunks, and the last again")
		require.LessOrEqual(t, len(page["runs"].([]any)), 1, "a page holds at most its limit of a chunk's matches")
		for _, r := range page["runs"].([]any) {
			got = append(got, r.(map[string]any)["runId"].(string))
		}
		if page["hasMore"] != true {
			break
		}
		cursor = "&cursor=" + page["nextCursor"].(string)
	}
	var want []string
	for i := 0; i < runs; i += 300 {
		want = append(want, fmt.Sprintf("bulk-%05d", i))
	}
	require.Equal(t, want, got, "every match, once, in order")
}

// TestASearchMatchesOutsideTheEnginesRead: a search (q) lowercases and scans each run's id, team, workflow and goal
// (a goal may be 256K characters), up to 5,000 runs a page; the engine publishes its next group, and answers its
// commands, only once every read in progress has ended. So the runs are matched after the read that copies them: a
// command is answered while a search is matching.
func TestASearchMatchesOutsideTheEnginesRead(t *testing.T) {
	f := newFixture(t, Options{})
	matching, release := make(chan struct{}), make(chan struct{})
	var once, released sync.Once
	f.srv.searching = func() { once.Do(func() { close(matching); <-release }) }
	releaseSearch := func() { released.Do(func() { close(release) }) }
	t.Cleanup(releaseSearch) // before the fixture's, which closes the server: on a failure too
	answered := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, f.web.URL+"/api/v1/runs?q=keep", nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := f.web.Client().Do(req)
		if err != nil {
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	recv(t, matching, "start of the search's matching")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a guard against a hang, not a timing
	_, err := f.eng.Submit(ctx, commands.Request{Actor: audittest.Orchestrator,
		Command: &commands.TaskUsage{RunID: liveRun, TaskID: "01_lead", Input: 1, Output: 1}})
	cancel()
	releaseSearch()
	require.NoError(t, err, "a command was not answered while a search matched")
	require.Equal(t, http.StatusOK, recv(t, answered, "answer to the search"))
}

// TestStateAtIsTheReplayAtThatPosition: the run as of an earlier position or time shows what it was then.
func TestStateAtIsTheReplayAtThatPosition(t *testing.T) {
	f := newFixture(t, Options{})
	evs := f.ok(budgetRun + "/events?type=delegate.admitted")["events"].([]any)
	second := evs[1].(map[string]any)["metadata"].(map[string]any)["position"].(float64)
	before := uint64(second) - 1

	st := f.ok(fmt.Sprintf("%s/state?at=%d", budgetRun, before))
	require.Equal(t, float64(before), st["position"])
	require.Equal(t, "running", st["run"].(map[string]any)["status"])
	require.Len(t, st["delegations"].([]any), 1, "one delegation admitted before the second")
	// A past position is folded from the run alone: the daemon-wide count of held slots is not known there.
	slots := st["slots"].(map[string]any)
	require.Nil(t, slots["held"], "a past state names no daemon-wide held count: %v", slots)
	require.Equal(t, 1.0, slots["runHeld"])
	require.Len(t, slots["subIds"], 1)
	now := f.ok(budgetRun + "/state?at=" + strconv.FormatUint(head(f)+100, 10))
	require.Equal(t, float64(head(f)), now["position"], "a position past the head is the head")
	require.Equal(t, 0.0, now["slots"].(map[string]any)["held"], "the head's state knows the pool")
	require.Equal(t, "completed", now["run"].(map[string]any)["status"])
	require.Len(t, now["delegations"].([]any), 3)

	// By time: the scenario's clock moves one second per command from audittest.Epoch.
	at := audittest.Epoch.Add(8 * time.Second).Format(time.RFC3339)
	byTime := f.ok(budgetRun + "/state?at=" + url.QueryEscape(at))
	require.Len(t, byTime["delegations"].([]any), 2)
	require.Equal(t, at, byTime["at"])
	// The run did not exist at position 1 (engine.configured).
	f.fails(budgetRun+"/state?at=1", http.StatusNotFound, codeNotFound)
}

// TestStateAtTimeIsReplayAt: state?at=TIME stops where crewctl replay --at TIME stops (audit.Replay with At), at
// every second of the scenario and between, and shows the run the full rebuild shows there.
func TestStateAtTimeIsReplayAt(t *testing.T) {
	f := newFixture(t, Options{})
	for d := -time.Second; d <= 40*time.Second; d += 500 * time.Millisecond {
		at := audittest.Epoch.Add(d)
		res, err := audit.Replay(f.log, audit.ReplayOptions{At: &at})
		require.NoError(t, err)
		code, st := f.get(budgetRun + "/state?at=" + url.QueryEscape(at.Format(time.RFC3339Nano)))
		run, existed := res.State.Run(audittest.RunBudget)
		if !existed {
			require.Equal(t, http.StatusNotFound, code, "at %s", at)
			continue
		}
		require.Equal(t, http.StatusOK, code, "at %s: %v", at, st)
		require.Equal(t, float64(res.State.Position), st["position"], "at %s", at)
		require.Equal(t, string(run.Status), st["run"].(map[string]any)["status"], "at %s", at)
		require.Len(t, st["delegations"], len(res.State.Delegations(audittest.RunBudget)), "at %s", at)
	}
}

// TestExplainARejection: the "why?" of a rejection is the recorded decision re-run.
func TestExplainARejection(t *testing.T) {
	f := newFixture(t, Options{})
	evs := f.ok(budgetRun + "/events?type=delegate.rejected")["events"].([]any)
	for _, e := range evs {
		ev := e.(map[string]any)
		pos := int(ev["metadata"].(map[string]any)["position"].(float64))
		reason := ev["data"].(map[string]any)["reason"].(string)
		x := f.ok(fmt.Sprintf("/api/v1/events/%d/explain", pos))
		d, ok := x["decision"].(map[string]any)
		require.True(t, ok, "a rejection is a decision audit re-runs: %v", x)
		require.Equal(t, "delegate.request", d["command"])
		require.Contains(t, d["recorded"], reason)
		require.Contains(t, d["rule"], reason)
		require.Equal(t, false, d["drift"])
		require.LessOrEqual(t, d["position"].(float64), float64(pos))
		require.GreaterOrEqual(t, d["last"].(float64), float64(pos))
		require.Equal(t, "recorded", x["poolInputs"], "a request's daemon-wide inputs are its record's")
	}
	x := f.ok("/api/v1/events/2/explain")
	require.Nil(t, x["decision"], "run.created is not a decision audit re-runs")
	require.Equal(t, "run.created", x["event"].(map[string]any)["type"])
}

func TestHealthAndPage(t *testing.T) {
	f := newFixture(t, Options{})
	for _, p := range []string{"/healthz", "/readyz", "/", "/runs/abc", "/app.js"} {
		resp, err := f.web.Client().Get(f.web.URL + p)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, p)
	}
	f.fails("/api/v1/nothing", http.StatusNotFound, codeNotFound)
	require.NoError(t, f.eng.Close())
	resp, err := f.web.Client().Get(f.web.URL + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "a closed engine has not failed")
}

// /readyz answers the engine's owner's words for why it stops (NotReady), a cluster node's that lost its lease with
// its engine running too, and ready while they are empty.
func TestReadinessSaysWhyFromTheOwner(t *testing.T) {
	var why atomic.Pointer[string]
	why.Store(new(string))
	f := newFixture(t, Options{NotReady: func() string { return *why.Load() }})
	readyz := func() (int, string) {
		resp, err := f.web.Client().Get(f.web.URL + "/readyz")
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	code, body := readyz()
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ready\n", body)
	lost := "this crewd lost the writer lease; answering reads, then exiting"
	why.Store(&lost)
	code, body = readyz()
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "not ready: "+lost+"\n", body)
}

// TestMetricsSeries: the series are served, and a run's budget gauges exist only while it runs.
func TestMetricsSeries(t *testing.T) {
	m := NewMetrics()
	f := newFixture(t, Options{Metrics: m, Broker: fixedBrokerStats{Requests: []broker.RequestCount{
		{Method: "ping", Answer: "ok", N: 3}, {Method: "other", Answer: "not-implemented", N: 2}}}})
	// The fixture's engine has no observer: feed one group by hand, as the engine does.
	m.Committed(&commands.GroupReport{Commands: []commands.CommandReport{
		{Method: "delegate.request", Outcome: commands.OutcomeAdmitted},
		{Method: "delegate.request", Outcome: commands.OutcomeRejected, Reason: events.ReasonSlotsExhausted},
	}, Events: 4, Head: 9, Commit: time.Millisecond, Append: time.Millisecond})
	m.Snapshotted(9, 1234, time.Now())
	text := metricsText(t, f)
	for _, s := range []string{
		`crewlog_commands_total{method="delegate.request",outcome="admitted"} 1`,
		`crewlog_commands_rejected_total{method="delegate.request",reason="slots-exhausted"} 1`,
		"crewlog_group_size_count 1", "crewlog_commit_seconds_count 1", "crewlog_fsync_seconds_count 1",
		"crewlog_events_appended_total 4", "crewlog_log_head ", "crewlog_slots_held 0", "crewlog_slots_capacity 3",
		`crewlog_resyncs_total{transport="sse"} 0`, `crewlog_resyncs_total{transport="socket"} 0`,
		`crewlog_requests_total{answer="ok",method="ping"} 3`,
		`crewlog_requests_total{answer="not-implemented",method="other"} 2`, "crewlog_http_streams 0", "crewlog_snapshot_bytes 1234",
		`crewlog_http_connections_evicted_total{state="idle"} 0`,
		`crewlog_budget_tokens_granted{run="` + liveRun + `"}`,
		"crewlog_storage_l0_files ", "crewlog_storage_l0_sublevels ", "crewlog_storage_compaction_debt_bytes ",
		"crewlog_storage_compactions_total ", "crewlog_storage_flushes_total ", "crewlog_storage_flush_bytes_total ",
		"crewlog_storage_compaction_bytes_read_total ", "crewlog_storage_compaction_bytes_written_total ",
		"crewlog_storage_write_stalls_total 0",
		"crewlog_storage_write_stall_seconds_total 0", "crewlog_outcome_filter_bytes ",
	} {
		require.Contains(t, text, s)
	}
	// The fixture's log has written its events: the WAL and the disk hold them.
	for _, name := range []string{"crewlog_storage_wal_bytes_written_total", "crewlog_storage_disk_bytes"} {
		require.Regexp(t, `(?m)^`+name+` [1-9]`, text)
	}
	require.NotContains(t, text, audittest.RunBudget, "an ended run has no series")
	f.do(audittest.Orchestrator, &commands.RunTransition{RunID: liveRun, To: "cancelled", Reason: "done"})
	require.NotContains(t, metricsText(t, f), liveRun, "its series go when the run ends")
}

// fixedBrokerStats is a socket server's census that never changes.
type fixedBrokerStats broker.Stats

func (s fixedBrokerStats) Stats() broker.Stats { return broker.Stats(s) }

func metricsText(t *testing.T, f *fixture) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, f.web.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := f.web.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var b strings.Builder
	_, err = fmt.Fprint(&b, readAll(t, resp))
	require.NoError(t, err)
	return b.String()
}

func TestBoundedLabels(t *testing.T) {
	b := boundedLabels{max: 2}
	require.Equal(t, "a", b.value("a"))
	require.Equal(t, "b", b.value("b"))
	require.Equal(t, "other", b.value("c"))
	require.Equal(t, "a", b.value("a"))
}

// TestEventsNewestFirst: order=desc pages back from the newest event (or from before a cursor), and its pages
// together are the ascending list reversed, with or without a type filter.
func TestEventsNewestFirst(t *testing.T) {
	f := newFixture(t, Options{})
	for _, filter := range []string{"", "&type=delegate.rejected&type=delegate.admitted"} {
		asc := f.ok(budgetRun + "/events?limit=1000" + filter)["events"].([]any)
		require.NotEmpty(t, asc)
		requireNewestFirst(t, f, budgetRun, filter, asc)
	}
	// A cursor in desc is "before this position".
	asc := f.ok(budgetRun + "/events?limit=1000")["events"].([]any)
	third := asc[2].(map[string]any)["metadata"].(map[string]any)["position"].(float64)
	page := f.ok(fmt.Sprintf("%s/events?order=desc&cursor=%d", budgetRun, int(third)))
	require.Equal(t, []any{asc[1], asc[0]}, page["events"])
	require.Equal(t, false, page["hasMore"])
	f.fails(budgetRun+"/events?order=sideways", http.StatusBadRequest, codeBadParams)
}

// TestEventsNewestFirstCountsForeignEvents: an imported run's stream holds foreign.imported events, which count in
// no projection; order=desc starts at the stream's newest event all the same, and its pages are the ascending list
// reversed.
func TestEventsNewestFirstCountsForeignEvents(t *testing.T) {
	f := newFixture(t, Options{})
	const run = "imported-1"
	foreign := func(seq int64) commands.ImportedEvent {
		return commands.ImportedEvent{Type: events.TypeForeignImported, TimeMs: 1000 + seq,
			Payload: &events.ForeignImported{Source: events.ForeignSourcePicrew, Type: "hook.executed", Seq: seq}}
	}
	r := f.do(events.Actor{Role: events.RoleAdmin}, &commands.Import{Source: events.ForeignSourcePicrew, RunID: run,
		Events: []commands.ImportedEvent{
			{Type: events.TypeRunCreated, TimeMs: 1000, Payload: &events.RunCreated{Team: "t", Goal: "g", Cwd: "/srv"}},
			foreign(1), foreign(2), foreign(3)}})
	require.Nil(t, r.Rejected, "%v", r.Rejected)
	asc := f.ok("/api/v1/runs/" + run + "/events?limit=1000")["events"].([]any)
	require.Len(t, asc, 4)
	requireNewestFirst(t, f, "/api/v1/runs/"+run, "", asc)
}

// requireNewestFirst pages run's events (filter: the query's type params) newest first, two at a time, and requires
// the pages to be asc, its events oldest first, reversed.
func requireNewestFirst(t *testing.T, f *fixture, run, filter string, asc []any) {
	t.Helper()
	var desc []any
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 1000)
		q := "?order=desc&limit=2" + filter
		if cursor != "" {
			q += "&cursor=" + cursor
		}
		page := f.ok(run + "/events" + q)
		desc = append(desc, page["events"].([]any)...)
		if page["hasMore"] != true {
			break
		}
		cursor = page["nextCursor"].(string)
	}
	require.Len(t, desc, len(asc), filter)
	for i := range asc {
		require.Equal(t, asc[i], desc[len(desc)-1-i], filter)
	}
}

// TestRebuildsBoundedPerPrincipal: a credential with maxRebuildsPerPrincipal rebuilds (or reads of the log up to a
// time) in progress or waiting is refused another (429); another credential is not, and the first gets its turn back when one ends.
func TestRebuildsBoundedPerPrincipal(t *testing.T) {
	f := newFixture(t, Options{})
	c := &f.srv.states
	admin := principal{kind: kindAdmin, key: "admin"}
	ctx := t.Context()
	_, done, err := c.turn(ctx, admin) // holds the rebuild slot
	require.NoError(t, err)
	waiting := make(chan error, maxRebuildsPerPrincipal)
	queueRebuilds(ctx, c, waiting, admin, maxRebuildsPerPrincipal-1)
	// The waiters count as soon as they are queued.
	awaitTurns(t, c.rebuilds, admin.key, maxRebuildsPerPrincipal, 0)
	code, m := f.get(budgetRun + "/state?at=5")
	require.Equal(t, http.StatusTooManyRequests, code)
	require.Equal(t, codeTooManyRebuilds, m["error"].(map[string]any)["code"])
	f.fails("/api/v1/events/5/explain", http.StatusTooManyRequests, codeTooManyRebuilds)
	// A time is resolved by reading every run's events up to it (times do not follow positions), in the turn its
	// fold then holds: it takes the turn even where the answer then comes from the published state (a time past
	// the head).
	f.fails(budgetRun+"/state?at="+url.QueryEscape(audittest.Epoch.AddDate(1, 0, 0).Format(time.RFC3339)),
		http.StatusTooManyRequests, codeTooManyRebuilds)
	ro := principal{kind: kindReadOnly, key: keyReadOnlyPrefix + digestOf(roToken)}
	queueRebuilds(ctx, c, waiting, ro, 1) // another credential waits its turn rather than being refused
	awaitTurns(t, c.rebuilds, ro.key, 1, 0)
	done()
	done() // a turn is given back once
	for i := 0; i < maxRebuildsPerPrincipal; i++ {
		require.NoError(t, recv(t, waiting, "turn of a queued rebuild"))
	}
	require.Zero(t, c.rebuilds.Keys(), "no rebuild in progress: no principal's count is kept")
	require.Equal(t, []int{0, 0}, slotLoad(c.slot), "the rebuild slot is free")
	f.ok(budgetRun + "/state?at=5")
}

// queueRebuilds starts n rebuild turns of p in the background, each given back as soon as it is had, and sends
// each one's error to waiting.
func queueRebuilds(ctx context.Context, c *stateCache, waiting chan<- error, p principal, n int) {
	for range n {
		go func() {
			_, done, err := c.turn(ctx, p)
			if err == nil {
				done()
			}
			waiting <- err
		}()
	}
}

// TestRebuildsRefusalSaysWhenToTryAgain: a 429 too-many-rebuilds says Retry-After: the rebuilds in progress or
// waiting, every credential's, times the recent rebuilds' pace (timed by Options.Now), in whole seconds rounded up,
// at least 1 and at most maxRebuildsRetryAfter; and its message says the same.
func TestRebuildsRefusalSaysWhenToTryAgain(t *testing.T) {
	for _, tc := range []struct {
		name   string
		took   []time.Duration // the rebuilds done before, in order
		others int             // another credential's rebuilds waiting
		want   string
	}{
		{name: "no rebuild timed yet", want: "1"},
		{name: "quick rebuilds", took: []time.Duration{20 * time.Millisecond}, want: "1"},
		{name: "each rebuild 600 ms, 4 queued", took: []time.Duration{600 * time.Millisecond}, want: "3"},
		{name: "another credential's queue counts", took: []time.Duration{600 * time.Millisecond}, others: 3, want: "5"},
		{name: "a moving mean", took: []time.Duration{2 * time.Second, 6 * time.Second}, want: "12"},
		{name: "never beyond the bound", took: []time.Duration{time.Hour}, want: strconv.Itoa(maxRebuildsRetryAfter)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var clock atomic.Int64
			f := newFixture(t, Options{Now: func() time.Time { return time.Unix(0, clock.Load()) }})
			c := &f.srv.states
			admin := principal{kind: kindAdmin, key: "admin"}
			ctx := t.Context()
			for _, d := range tc.took {
				_, done, err := c.turn(ctx, admin)
				require.NoError(t, err)
				clock.Add(int64(d))
				done()
			}
			_, done, err := c.turn(ctx, admin) // holds the rebuild slot
			require.NoError(t, err)
			waiting := make(chan error, maxRebuildsPerPrincipal+tc.others)
			queueRebuilds(ctx, c, waiting, admin, maxRebuildsPerPrincipal-1)
			ro := principal{kind: kindReadOnly, key: keyReadOnlyPrefix + digestOf(roToken)}
			queueRebuilds(ctx, c, waiting, ro, tc.others)
			awaitTurns(t, c.rebuilds, admin.key, maxRebuildsPerPrincipal, 0)
			awaitSlot(t, c.slot, 1, maxRebuildsPerPrincipal-1+tc.others)
			for _, path := range []string{budgetRun + "/state?at=5", "/api/v1/events/5/explain"} {
				req, err := http.NewRequest(http.MethodGet, f.web.URL+path, nil)
				require.NoError(t, err)
				req.Header.Set("Authorization", "Bearer "+adminToken)
				resp, err := f.web.Client().Do(req)
				require.NoError(t, err)
				var body errorBody
				require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
				resp.Body.Close()
				require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, path)
				require.Equal(t, codeTooManyRebuilds, body.Error.Code, path)
				require.Equal(t, tc.want, resp.Header.Get("Retry-After"), path)
				require.Contains(t, body.Error.Message, "try again in "+tc.want+" s", path)
			}
			done()
			for i := 1; i < maxRebuildsPerPrincipal+tc.others; i++ {
				require.NoError(t, recv(t, waiting, "turn of a queued rebuild"))
			}
			require.Zero(t, c.queued.Load(), "no rebuild in progress or waiting")
		})
	}
}
