package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/broker/brokertest"
	"github.com/crewlog/crewlog/broker/internal/turns"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

const (
	adminToken = "admin-secret-token"
	roToken    = "crro_read-only-secret"
	// liveRun is a run the fixture creates after the scenario, left running.
	liveRun = "team_20261001100000_a1b2c3d4e5f60009"
)

// guard bounds how long a test waits for an answer, a frame, a signal or a goroutine before failing: a guard against
// a hang, never a synchronisation nor a timing.
const guard = time.Minute

// recv is the next value on ch, failing the test, naming what it awaited, if none comes within guard.
func recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	return brokertest.Recv(t, ch, guard, what)
}

// closeWithin closes srv, failing the test if Close has not returned within guard: it waits for every request and
// stream to end, so a test that left one held would otherwise fail only by the package's timeout.
func closeWithin(t testing.TB, srv *Server) error {
	t.Helper()
	closed := make(chan error, 1)
	go func() { closed <- srv.Close() }()
	return recv(t, closed, "return from the server's Close")
}

// liveTasks are liveRun's tasks, each running, with a credential and a pending question.
var liveTasks = []string{"01_lead", "02_help", "03_check"}

// staticTokens is a TokenChecker over a fixed set, which a test may change.
type staticTokens struct {
	mu sync.Mutex
	m  map[string]bool
}

func (s *staticTokens) Valid(d string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[d]
}

func (s *staticTokens) set(tok string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[digestOf(tok)] = ok
}

// fixture is a store holding audittest's scenario (two ended runs, every decision replay --explain re-runs) plus
// one running run, an engine over it, and the API served by httptest.
type fixture struct {
	t      testing.TB
	log    *eventlog.Log
	eng    *commands.Engine
	srv    *Server
	web    *httptest.Server
	tokens *staticTokens
	n      int // commands submitted by the fixture
}

func newFixture(t testing.TB, opts Options) *fixture {
	t.Helper()
	return newFixtureEngine(t, opts, commands.Options{SnapshotEvery: -1, ExpiryInterval: -1})
}

// newFixtureEngine is newFixture with the engine opened with eo.
func newFixtureEngine(t testing.TB, opts Options, eo commands.Options) *fixture {
	t.Helper()
	return newFixtureStore(t, opts, eo, nil, nil)
}

// newFixtureStore is newFixtureEngine with the log opened with lo, once prepare (when not nil) has been given the
// store's directory holding the scenario.
func newFixtureStore(t testing.TB, opts Options, eo commands.Options, lo *eventlog.Options,
	prepare func(dir string, head uint64)) *fixture {
	t.Helper()
	dir := t.TempDir()
	head := audittest.Scenario(t, dir)
	if prepare != nil {
		prepare(dir, head)
	}
	l, err := eventlog.Open(dir, lo)
	require.NoError(t, err)
	eng, err := commands.Open(l, eo)
	require.NoError(t, err)
	f := &fixture{t: t, log: l, eng: eng, tokens: &staticTokens{m: map[string]bool{}}}
	f.tokens.set(roToken, true)
	opts.Engine, opts.Log, opts.AdminDigest, opts.ReadOnly = eng, l, digestOf(adminToken), f.tokens
	if opts.UI == nil {
		opts.UI = fstest.MapFS{"index.html": {Data: []byte("<h1>page</h1>")}, "app.js": {Data: []byte("1")}}
	}
	f.srv, err = New(opts)
	require.NoError(t, err)
	f.web = httptest.NewServer(f.srv.Handler())
	// LoginURL and the session cookie's name name the listener's address; the test's listener is httptest's.
	f.srv.mu.Lock()
	f.srv.reachedAt("127.0.0.1", f.web.Listener.Addr().(*net.TCPAddr).Port)
	f.srv.mu.Unlock()
	require.Equal(t, f.web.URL, f.srv.BaseURL())
	t.Cleanup(func() {
		f.web.CloseClientConnections()
		_ = closeWithin(t, f.srv)
		// NB: httptest's Close waits for every request in a handler, as the server's does.
		webClosed := make(chan struct{})
		go func() {
			f.web.Close()
			close(webClosed)
		}()
		recv(t, webClosed, "return from the test listener's Close")
		require.NoError(t, eng.Close())
		require.NoError(t, l.Close())
	})
	f.do(audittest.Admin, &commands.RunCreate{RunID: liveRun, Team: "live", Goal: "keep going", Cwd: "/srv/live",
		BudgetTotal: new(int64(5000))})
	f.do(audittest.Orchestrator, &commands.RunTransition{RunID: liveRun, To: "running"})
	for _, task := range liveTasks {
		f.do(audittest.Orchestrator, &commands.TaskCreate{RunID: liveRun, TaskID: task, Role: "executor",
			Agent: "executor", Title: task, Cwd: "/srv/live/" + task, StepID: task})
		f.do(audittest.Orchestrator, &commands.TaskTransition{RunID: liveRun, TaskID: task, To: "running"})
		f.do(audittest.Orchestrator, &commands.CredentialIssue{RunID: liveRun, TaskID: task, Digest: digestOf("tok-" + task)})
		r := f.do(audittest.Worker(task), &commands.WaitRequest{RunID: liveRun, TaskID: task, Question: "go on?"})
		require.Nil(t, r.Rejected, "%v", r.Rejected)
	}
	f.job(liveJob, "02_help")
	return f
}

// liveJob is liveRun's job: leased, one call admitted, one refused as not granted, one with a wrong nonce.
const liveJob = "job-live-1"

// job creates job jobID of task in liveRun, opens its lease (root call-<jobID>) and sends its worker's three
// proxied calls: r1 (granted), r2 (a tool not granted), r3 (a wrong nonce).
func (f *fixture) job(jobID, task string) {
	f.t.Helper()
	grant, err := json.Marshal([]any{map[string]any{"name": "read", "label": "read", "description": "read",
		"parameters": map[string]any{}, "callable": "mgr:read",
		"sourceInfo": map[string]any{"path": "/t", "source": "pi", "scope": "user", "origin": "package"}}})
	require.NoError(f.t, err)
	nonce := commands.SecretDigest("nonce-" + jobID)
	for _, c := range []struct {
		actor  events.Actor
		cmd    commands.Command
		refuse string
	}{
		{audittest.Orchestrator, &commands.JobCreate{RunID: liveRun, JobID: jobID, TaskID: task, Tools: grant, NonceDigest: nonce}, ""},
		{audittest.Orchestrator, &commands.LeaseOpen{RunID: liveRun, JobID: jobID, Mode: events.LeaseStart, RootToolCallID: "call-" + jobID}, ""},
		{audittest.Worker(task), &commands.ProxyRequest{RunID: liveRun, TaskID: task, JobID: jobID, RequestID: "r1",
			RequestIDChars: 2, NonceDigest: nonce, Tool: "read", Args: json.RawMessage(`{}`)}, ""},
		{audittest.Worker(task), &commands.ProxyRequest{RunID: liveRun, TaskID: task, JobID: jobID, RequestID: "r2",
			RequestIDChars: 2, NonceDigest: nonce, Tool: "bash", Args: json.RawMessage(`{}`)}, "not-granted"},
		{audittest.Worker(task), &commands.ProxyRequest{RunID: liveRun, TaskID: task, JobID: jobID, RequestID: "r3",
			RequestIDChars: 2, NonceDigest: commands.SecretDigest("wrong"), Tool: "read", Args: json.RawMessage(`{}`)}, "nonce"},
	} {
		r := f.do(c.actor, c.cmd)
		if c.refuse == "" {
			require.Nil(f.t, r.Rejected, "%v", r.Rejected)
		} else {
			require.NotNil(f.t, r.Rejected, c.refuse)
		}
	}
}

// do submits a command as actor and requires an answer (a rejection is an answer).
func (f *fixture) do(actor events.Actor, cmd commands.Command) commands.Reply {
	f.t.Helper()
	f.n++
	r, err := f.eng.Submit(context.Background(), commands.Request{Actor: actor, Command: cmd})
	require.NoError(f.t, err)
	return r
}

// admitAll submits reqs in one go and requires each admitted: the bulk a test needs before it reads.
func (f *fixture) admitAll(reqs []commands.Request) []commands.Reply {
	f.t.Helper()
	replies, err := f.eng.SubmitAll(context.Background(), reqs)
	require.NoError(f.t, err)
	for _, r := range replies {
		require.Nil(f.t, r.Rejected, "%v", r.Rejected)
	}
	return replies
}

// get requests path with the admin token and decodes the JSON answer.
func (f *fixture) get(path string) (int, map[string]any) {
	f.t.Helper()
	return f.getAs(path, "Bearer "+adminToken)
}

func (f *fixture) getAs(path, auth string) (int, map[string]any) {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodGet, f.web.URL+path, nil)
	require.NoError(f.t, err)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	return f.send(req)
}

func (f *fixture) send(req *http.Request) (int, map[string]any) {
	f.t.Helper()
	resp, err := f.web.Client().Do(req)
	require.NoError(f.t, err)
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// NB: a stream that opened where a refusal was expected never ends: its status fails the caller at once.
		return resp.StatusCode, nil
	}
	b, err := io.ReadAll(resp.Body)
	require.NoError(f.t, err)
	var m map[string]any
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		require.NoError(f.t, json.Unmarshal(b, &m), "body %s", b)
	}
	return resp.StatusCode, m
}

// ok requires a 200 and returns the body.
func (f *fixture) ok(path string) map[string]any {
	f.t.Helper()
	code, m := f.get(path)
	require.Equal(f.t, http.StatusOK, code, "GET %s: %v", path, m)
	return m
}

// fails requires status and error code.
func (f *fixture) fails(path string, status int, code string) string {
	f.t.Helper()
	got, m := f.get(path)
	require.Equal(f.t, status, got, "GET %s: %v", path, m)
	e, _ := m["error"].(map[string]any)
	require.Equal(f.t, code, e["code"], "GET %s: %v", path, m)
	msg, _ := e["message"].(string)
	require.NotEmpty(f.t, msg)
	return msg
}

// streamReader reads SSE frames from a response body.
type sseFrame struct {
	id, event, data string
}

func readFrames(body io.Reader, frames chan<- sseFrame) {
	defer close(frames)
	buf := make([]byte, 0, 1<<16)
	tmp := make([]byte, 32<<10)
	for {
		n, err := body.Read(tmp)
		buf = append(buf, tmp[:n]...)
		for {
			i := strings.Index(string(buf), "\n\n")
			if i < 0 {
				break
			}
			var fr sseFrame
			for _, line := range strings.Split(string(buf[:i]), "\n") {
				switch {
				case strings.HasPrefix(line, "id: "):
					fr.id = line[4:]
				case strings.HasPrefix(line, "event: "):
					fr.event = line[7:]
				case strings.HasPrefix(line, "data: "):
					fr.data = line[6:]
				}
			}
			buf = buf[i+2:]
			if fr.event != "" {
				frames <- fr
			}
		}
		if err != nil {
			return
		}
	}
}

// openStream opens the stream at path, as admin unless header carries an Authorization or a Cookie, and returns
// its frames; it ends with the test.
func (f *fixture) openStream(path string, header http.Header) <-chan sseFrame {
	f.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f.t.Cleanup(cancel)
	return f.openStreamVia(ctx, f.web.Client(), f.web.URL, path, header)
}

// openStreamVia is openStream through client to the server at base; the stream ends with ctx.
func (f *fixture) openStreamVia(ctx context.Context, client *http.Client, base, path string, header http.Header) <-chan sseFrame {
	f.t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	require.NoError(f.t, err)
	if header.Get("Authorization") == "" && header.Get("Cookie") == "" {
		req.Header.Set("Authorization", "Bearer "+adminToken)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	require.NoError(f.t, err)
	require.Equal(f.t, http.StatusOK, resp.StatusCode)
	require.Equal(f.t, "text/event-stream", resp.Header.Get("Content-Type"))
	frames := make(chan sseFrame, 1024)
	go func() {
		defer resp.Body.Close()
		readFrames(resp.Body, frames)
	}()
	return frames
}

// next is the next frame, failing the test if none comes within a minute (a guard against a hang, not a timing
// assertion).
func next(t testing.TB, frames <-chan sseFrame) sseFrame {
	t.Helper()
	select {
	case fr, ok := <-frames:
		require.True(t, ok, "the stream ended")
		return fr
	case <-time.After(time.Minute):
		t.Fatal("no frame within a minute")
		return sseFrame{}
	}
}

func head(f *fixture) uint64 {
	var h uint64
	f.eng.Read(func(st *projections.State) { h = st.Position })
	return h
}

func readAll(t testing.TB, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// awaitSlot waits until the rebuild slot is held (1) or not (0) and has waiting takers waiting, or fails.
func awaitSlot(t *testing.T, s *turns.Shared, held, waiting int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a guard against a hang, not a timing
	defer cancel()
	require.NoError(t, s.AwaitLoad(ctx, held, waiting))
}

// slotLoad is the rebuild slot's Load: whether it is held, and its takers waiting.
func slotLoad(s *turns.Shared) []int {
	held, waiting := s.Load()
	return []int{held, waiting}
}

// awaitTurns waits until key has held turns of p and waiting takers waiting for one.
func awaitTurns(t *testing.T, p *turns.PerKey, key string, held, waiting int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a guard against a hang, not a timing
	defer cancel()
	require.NoError(t, p.AwaitLoad(ctx, key, held, waiting))
}
