package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/projections"
)

// fuzzMethods are the methods FuzzAPI picks from by a byte; CONNECT and TRACE are in because the server's
// parser passes them to the handler like any other.
var fuzzMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete,
	http.MethodPatch, http.MethodOptions, http.MethodConnect, http.MethodTrace, "PROPFIND"}

// Who a fuzzed request authenticates as, picked by a byte. The first three are principals; the others are not.
const (
	fuzzAdmin = iota
	fuzzReadOnly
	fuzzSession
	fuzzNoAuth
	fuzzWrongToken
	fuzzWrongScheme
	fuzzForgedSession
	fuzzLongToken
	fuzzAuths
)

// fuzzHosts are the Host headers a fuzzed request may send, picked by a byte: loopback names, and one that the
// DNS-rebinding check must refuse.
var fuzzHosts = []string{"127.0.0.1:7717", "localhost", "[::1]:7717", "evil.example"}

// publicPatterns are the routes that need no credential (docs/dashboard-api.md): every other pattern the mux
// matches is a data route.
var publicPatterns = []string{"/", "/healthz", "/readyz", "/login"}

// errorCodes are the documented error codes of each 4xx status.
var errorCodes = map[int][]string{
	http.StatusBadRequest:       {codeBadParams, codeBadCursor},
	http.StatusUnauthorized:     {codeAuth},
	http.StatusForbidden:        {codeForbidden},
	http.StatusNotFound:         {codeNotFound},
	http.StatusMethodNotAllowed: {codeMethod},
	http.StatusTooManyRequests:  {codeTooManyStreams, codeTooManyRebuilds, codeTooManyReads},
}

// errorLog keeps the records the server logs at error level: the server logs every 500 and every stream that
// failed, so a fuzzed request that left one here hit a failure of the server, whatever its status says.
type errorLog struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	text slog.Handler
}

func newErrorLog() *errorLog {
	l := &errorLog{}
	l.text = slog.NewTextHandler(&l.buf, &slog.HandlerOptions{Level: slog.LevelError})
	return l
}

func (l *errorLog) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelError }

func (l *errorLog) Handle(ctx context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.text.Handle(ctx, r)
}

func (l *errorLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *errorLog) WithGroup(string) slog.Handler      { return l }

// take returns what was logged since the last take.
func (l *errorLog) take() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.buf.String()
	l.buf.Reset()
	return s
}

// committingRecorder is a ResponseRecorder that cancels the request's context once the handler commits its
// answer (headers written). The status is then decided; a stream (SSE) sees its client gone right after its
// first write and ends, so no request of the fuzzer waits for events or keep-alives.
type committingRecorder struct {
	*httptest.ResponseRecorder
	cancel context.CancelFunc
}

func (c *committingRecorder) WriteHeader(code int) {
	c.ResponseRecorder.WriteHeader(code)
	c.cancel()
}

func (c *committingRecorder) Write(b []byte) (int, error) {
	n, err := c.ResponseRecorder.Write(b)
	c.cancel()
	return n, err
}

// fuzzHandlerLimit bounds one fuzzed request: the slowest route here (a rebuild of the fixture's largest run)
// answers in milliseconds, so a request still running after this waits for something that will not come.
const fuzzHandlerLimit = 20 * time.Second

// FuzzAPI sends one request of any method, path, query, body and credential to the API's handler in process.
// Whatever it is, the server must not panic or answer 5xx (a bad request is the client's fault: a 4xx with the
// documented {"error":{"code","message"}} body says so), a data route must never answer 2xx without a credential,
// and the request must leave nothing behind that could change another principal's answer: no rebuild turn or
// stream still counted, no state changed.
//
// Every route is in: the live stream (GET /api/v1/stream) too, because the request's context is canceled as soon
// as the handler writes its headers (committingRecorder), which ends a stream after its hello and any catch-up.
func FuzzAPI(f *testing.F) {
	elog := newErrorLog()
	fx := newFixture(f, Options{Metrics: NewMetrics(), Logger: slog.New(elog)})
	srv, h := fx.srv, fx.srv.Handler()
	session := srv.sessions.add(keyCrewd, time.Now().Add(SessionLifetime), time.Now())
	headPos := head(fx)

	// Realistic ids from the fixture: every run, its first task and its first delegation (the live run's job is
	// liveJob).
	type runIDs struct{ run, task, sub string }
	var ids []runIDs
	fx.eng.Read(func(st *projections.State) {
		page, err := st.Runs(projections.RunFilter{})
		require.NoError(f, err)
		for _, r := range page.Runs {
			id := runIDs{run: r.RunID}
			if tp, err := st.TasksPage(r.RunID, projections.PageFilter{}); err == nil && len(tp.Items) > 0 {
				id.task = tp.Items[0].TaskID
			}
			if dp, err := st.DelegationsPage(r.RunID, projections.PageFilter{}); err == nil && len(dp.Items) > 0 {
				id.sub = dp.Items[0].SubID
			}
			ids = append(ids, id)
		}
	})
	require.NotEmpty(f, ids)

	type seed struct {
		method, auth, hdr uint8
		path, query       string
		body              []byte
	}
	var seeds []seed
	get := func(path, query string) {
		seeds = append(seeds, seed{path: path, query: query}, seed{auth: fuzzNoAuth, path: path, query: query})
	}
	// Every route of every run, bare and with each parameter it reads given a valid value, so that a mutation
	// of one value or one name is one step away.
	for _, id := range ids {
		run := "/api/v1/runs/" + id.run
		get(run, "")
		for _, sub := range []string{"tasks", "delegations", "ledger", "mailbox", "asks", "jobs", "credentials", "events"} {
			get(run+"/"+sub, "")
			get(run+"/"+sub, "limit=1&cursor=1")
		}
		get(run+"/ledger", "taskId="+id.task+"&limit=1&cursor=1")
		get(run+"/mailbox", "taskId="+id.task+"&pending=true&limit=1&cursor=1")
		get(run+"/asks", "pending=true&limit=1&cursor=1")
		get(run+"/events", "order=desc&limit=2&cursor=30&type=delegate.admitted&type=delegate.rejected")
		get(run+"/state", "at=5")
		get(run+"/state", "at="+strconv.FormatUint(headPos, 10))
		get(run+"/state", "at="+audittest.Epoch.Add(8*time.Second).Format(time.RFC3339))
		get(run+"/jobs/"+liveJob, "limit=1&cursor=1")
		get("/api/v1/stream", "run="+id.run+"&type=task.created&after=0")
		get("/api/v1/runs", "status=running&status=completed&newest=true&q="+id.sub+"&limit=2&cursor=1")
	}
	for pos := uint64(0); pos <= headPos+1; pos++ {
		get("/api/v1/events/"+strconv.FormatUint(pos, 10)+"/explain", "")
	}
	get("/api/v1/runs", "")
	get("/api/v1/slots", "")
	get("/api/v1/stream", "")
	get("/api/v1/stream", "after=0&type=task.created")
	get("/metrics", "")
	get("/healthz", "")
	get("/readyz", "")
	get("/login", "code=nope")
	get("/", "")
	get("/app.js", "")
	get("/runs/abc", "")
	get("/api/v1/nothing", "")
	seeds = append(seeds,
		seed{method: 2, path: "/api/v1/login"},                         // POST: a new login link
		seed{method: 2, auth: fuzzSession, path: "/api/v1/login"},      // a session may not mint one
		seed{method: 2, auth: fuzzNoAuth, path: "/api/v1/login"},       // nor anyone without a credential
		seed{method: 2, path: "/api/v1/runs", body: []byte(`{"x":1}`)}, // the API is read-only
		seed{method: 4, path: "/api/v1/runs/" + liveRun},
		seed{method: 6, path: "/"},
		seed{method: 7, path: "/api/v1/runs"},
		seed{auth: fuzzReadOnly, path: "/api/v1/runs"},
		seed{auth: fuzzSession, path: "/api/v1/runs"},
		seed{auth: fuzzWrongToken, path: "/api/v1/runs"},
		seed{auth: fuzzWrongScheme, path: "/api/v1/slots"},
		seed{auth: fuzzForgedSession, path: "/metrics"},
		seed{auth: fuzzLongToken, path: "/api/v1/runs/" + liveRun + "/tasks"},
		seed{hdr: 3, path: "/api/v1/runs"},                            // a Host that is not loopback
		seed{path: "http://evil.example/api/v1/runs"},                 // absolute form: the URL's host is the Host
		seed{path: "http://127.0.0.1/api/v1/slots", auth: fuzzNoAuth}, // absolute form, loopback
		seed{hdr: 4, path: "/api/v1/stream", body: []byte("3")},       // Last-Event-ID from the body
		seed{hdr: 4, path: "/api/v1/stream", body: []byte("x")},
		seed{method: 7, path: "127.0.0.1:7717"}, // CONNECT's authority form: no path
		seed{method: 6, path: "*"},              // OPTIONS *
	)
	// Hostile variants, as the admin: what a client can send that no page would.
	long := strings.Repeat("r", maxIDLen+1)
	for _, p := range []string{
		"/api/v1/runs/" + long, "/api/v1/runs/" + long + "/tasks", "/api/v1/runs/" + strings.Repeat("x", 10000) + "/events",
		"/api/v1/runs/" + liveRun + "/jobs/" + strings.Repeat("j", 300), "/api/v1/runs/../../etc/passwd",
		"/api/v1/runs/%2e%2e/tasks", "/api/v1/runs/a%00b", "/api/v1/runs/a%2Fb/tasks", "/api/v1/runs/%ff%fe/state",
		"/api/v1/runs/Ωμέγα/ledger", "/api/v1/runs/\u202e", "/api/v1//runs", "/api/v1/runs/", "/api/v1/runs/x/",
		"/api/v1/events/18446744073709551616/explain", "/api/v1/events/-1/explain", "/api/v1/events/1e3/explain",
		"/api/v1/events/%20/explain", "/%2e%2e/%2e%2e/", "/..", "*", "/api", "/api/", "/metrics/", "/login/",
		"/index.html", "/app.js/..", "//evil.example/api/v1/runs", "/api/v1/runs?", "127.0.0.1:7717",
	} {
		seeds = append(seeds, seed{path: p})
	}
	for _, q := range []string{
		"limit=1e309", "limit=-1", "limit=0", "limit=18446744073709551616", "limit=1&limit=1", "limit=%00",
		"cursor=" + strings.Repeat("z", maxCursorLen+1), "cursor=zz!", "cursor=-1", "cursor=%ff", "cursor=99999999999999999999",
		"status=running&status=running&status=running&status=running&status=running&status=running&status=running&status=running",
		"status=", "newest=TRUE", "q=%E2%80%AE", "q=" + strings.Repeat("%", 3), "bogus=1", "a;b=c", "=", "&&&", "%zz",
	} {
		seeds = append(seeds, seed{path: "/api/v1/runs", query: q})
		seeds = append(seeds, seed{path: "/api/v1/runs/" + liveRun + "/jobs/" + liveJob, query: q})
	}
	for _, q := range []string{
		"at=-1", "at=1e309", "at=18446744073709551616", "at=0", "at=9999-12-31T23:59:59Z", "at=0000-01-01T00:00:00Z",
		"at=2026-10-01T09:00:00%2B99:00", "at=2026-02-30T00:00:00Z", "at=5&at=6", "at=",
	} {
		seeds = append(seeds, seed{path: "/api/v1/runs/" + audittest.RunBudget + "/state", query: q})
	}
	for _, q := range []string{
		"order=desc&cursor=0", "order=desc&cursor=1", "order=desc&cursor=18446744073709551615", "cursor=18446744073709551615",
		"order=DESC", "type=" + strings.Repeat("t", 200), "limit=1000&order=desc",
	} {
		seeds = append(seeds, seed{path: "/api/v1/runs/" + audittest.RunBudget + "/events", query: q})
	}
	for _, q := range []string{"after=18446744073709551615", "after=-1", "run=nope", "run=" + liveRun + "&run=" + liveRun} {
		seeds = append(seeds, seed{path: "/api/v1/stream", query: q})
	}
	for _, s := range seeds {
		f.Add(s.method, s.auth, s.hdr, s.path, s.query, s.body)
	}

	f.Fuzz(func(t *testing.T, method, auth, hdr uint8, path, query string, body []byte) {
		target := path
		if query != "" {
			target += "?" + query
		}
		m := fuzzMethods[int(method)%len(fuzzMethods)]
		host := fuzzHosts[int(hdr)%len(fuzzHosts)]
		// The request as the server's own parser makes it from a request line; a target it refuses never
		// reaches the handler (the server answers 400 itself), nor does one with a space or a line break, which
		// would end the request line.
		if strings.ContainsAny(target, " \r\n") {
			return
		}
		if m == http.MethodOptions && target == "*" {
			return // net/http answers OPTIONS * itself
		}
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(m + " " + target + " HTTP/1.1\r\nHost: " + host + "\r\n\r\n")))
		if err != nil {
			return
		}
		req.RemoteAddr = "127.0.0.1:40000"
		req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		switch int(auth) % fuzzAuths {
		case fuzzAdmin:
			req.Header.Set("Authorization", "Bearer "+adminToken)
		case fuzzReadOnly:
			req.Header.Set("Authorization", "Bearer "+roToken)
		case fuzzSession:
			req.AddCookie(&http.Cookie{Name: srv.sessionCookieName(), Value: session})
			req.Header.Set(proofHeader, srv.sessionProof(session))
		case fuzzWrongToken:
			req.Header.Set("Authorization", "Bearer wrong-"+adminToken)
		case fuzzWrongScheme:
			req.Header.Set("Authorization", "Basic "+adminToken)
		case fuzzForgedSession:
			req.AddCookie(&http.Cookie{Name: srv.sessionCookieName(), Value: "forged"})
			req.Header.Set(proofHeader, srv.sessionProof("forged"))
		case fuzzLongToken:
			req.Header.Set("Authorization", "Bearer "+strings.Repeat(adminToken, 20))
		}
		authenticated := int(auth)%fuzzAuths < fuzzNoAuth
		if hdr&4 != 0 && isHeaderValue(body) {
			req.Header.Set("Last-Event-ID", string(body))
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req = req.WithContext(ctx)
		rec := &committingRecorder{ResponseRecorder: httptest.NewRecorder(), cancel: cancel}

		desc := m + " " + target + " as " + strconv.Itoa(int(auth)%fuzzAuths) + " Host " + host
		before := fx.eng.Head()
		done := make(chan any, 1)
		go func() {
			defer func() { done <- recover() }()
			h.ServeHTTP(rec, req)
		}()
		select {
		case v := <-done:
			require.Nil(t, v, "%s: the handler panicked", desc)
		case <-time.After(fuzzHandlerLimit):
			t.Fatalf("%s: no answer within %s", desc, fuzzHandlerLimit)
		}

		res := rec.Result()
		got, _ := io.ReadAll(res.Body)
		require.Less(t, res.StatusCode, 500, "%s: %s", desc, got)
		require.Empty(t, elog.take(), "%s: the server logged a failure", desc)

		pattern := req.Pattern // set by the mux on the request it routes
		public := pattern == "" || slices.Contains(publicPatterns, pattern)
		if !authenticated && !public {
			require.False(t, res.StatusCode < 300, "%s: a data route (%s) answered %d without a credential: %s",
				desc, pattern, res.StatusCode, got)
			// NB: the mux redirects a path that is not clean to the clean one before any route runs: a 3xx carries
			// no data.
			if res.StatusCode/100 != 3 {
				require.Equal(t, http.StatusUnauthorized, res.StatusCode, "%s: %s", desc, got)
			}
		}
		switch {
		case pattern == "/login" && res.StatusCode == http.StatusUnauthorized:
			// A wrong or spent login code is answered in plain text: the browser shows it (documented).
		case res.StatusCode >= 400:
			require.Equal(t, "application/json", res.Header.Get("Content-Type"), "%s: %d %s", desc, res.StatusCode, got)
			var eb errorBody
			dec := json.NewDecoder(bytes.NewReader(got))
			dec.DisallowUnknownFields()
			require.NoError(t, dec.Decode(&eb), "%s: %d %s", desc, res.StatusCode, got)
			require.Contains(t, errorCodes[res.StatusCode], eb.Error.Code, "%s: %d %s", desc, res.StatusCode, got)
			require.NotEmpty(t, eb.Error.Message, "%s: %s", desc, got)
		case res.StatusCode == http.StatusOK && strings.HasPrefix(res.Header.Get("Content-Type"), "application/json"):
			require.True(t, json.Valid(got), "%s: %s", desc, got)
		}

		// Nothing of this request outlives it: another principal's next request finds the server as before.
		require.Equal(t, before, fx.eng.Head(), "%s: a read-only API changed the state", desc)
		require.Zero(t, srv.streams.open(), "%s: a stream is still counted", desc)
		require.Zero(t, srv.states.rebuilds.Keys(), "%s: a rebuild is still counted against its principal", desc)
		require.Equal(t, []int{0, 0}, slotLoad(srv.states.slot), "%s: the rebuild turn is still held", desc)
		require.Zero(t, srv.reads.Keys(), "%s: a turn of the principal is still counted", desc)
	})
}

// isHeaderValue reports whether b can be a header value as a client sends it: printable ASCII or tab.
func isHeaderValue(b []byte) bool {
	for _, c := range b {
		if (c < 0x20 && c != '\t') || c > 0x7e {
			return false
		}
	}
	return true
}
