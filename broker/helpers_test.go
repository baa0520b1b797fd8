package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/brokertest"
	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// testAdminToken is the admin secret of every test server.
const testAdminToken = "admin-secret-for-tests"

// guard bounds how long a test waits for a frame or a condition before failing: a failure guard, never a
// synchronisation.
const guard = 10 * time.Second

// waitGuard bounds how long a test waits for a signal or for goroutines that may do a test's whole work (dozens of
// clients' requests, a server's Close): longer than guard, as a loaded host under the race detector may need, and
// far short of the package's timeout, so that a hang fails naming what it waited for.
const waitGuard = time.Minute

// recv is the next value on ch, failing the test, naming what it awaited, if none comes within waitGuard.
func recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	return brokertest.Recv(t, ch, waitGuard, what)
}

// awaitGroup waits for wg, failing the test, naming what it awaited, if it is not done within waitGuard.
func awaitGroup(t testing.TB, wg *sync.WaitGroup, what string) {
	t.Helper()
	brokertest.AwaitGroup(t, wg, waitGuard, what)
}

// fixture is an engine on an in-memory log and a broker serving it on a real unix socket in t.TempDir().
type fixture struct {
	t     testing.TB
	log   *eventlog.Log
	dir   string // the store's directory (on the real disk with fixtureOpts.disk)
	eng   *commands.Engine
	srv   *Server
	cfg   projections.Config
	errc  chan error
	clock atomic.Int64
	// panics counts the panics the server recovered from (it logs each and
	// closes that connection, so a client alone cannot tell one happened).
	panics atomic.Int64
}

// recordHandler is a slog handler that hands every record, of any level, to a test's function.
type recordHandler func(slog.Record)

func (h recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordHandler) Handle(_ context.Context, r slog.Record) error {
	h(r)
	return nil
}
func (h recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordHandler) WithGroup(string) slog.Handler      { return h }

// panicCounter is a slog handler that counts the server's recovered panics in n.
func panicCounter(n *atomic.Int64) slog.Handler {
	return recordHandler(func(r slog.Record) {
		if r.Level >= slog.LevelError && strings.Contains(r.Message, "panic") {
			n.Add(1)
		}
	})
}

type fixtureOpts struct {
	opts   Options
	config *projections.Config
	write  time.Duration // writeTimeout override
	disk   bool          // keep the store on the real disk (benchmarks: the fsync is part of the cost)
	cold   bool          // runs go cold as soon as they end, and one cold run at most stays decoded
	fs     vfs.FS        // the store's file system, to open the same store again (default: a new in-memory one)
	// snapshotEvery is the engine's SnapshotEvery (0: its default; -1: never, so a start folds from position 1).
	snapshotEvery int64
	space         commands.SpaceGuard // the engine's Space (default none)
	// uncached: a block cache that keeps no block, beside a small memtable, so that a read of what the log holds
	// in its tables reaches the file system (fs) every time.
	uncached bool
	noViews  bool // the engine's NoViews: no view of a run is written when it goes cold
	// feedStarting is the server's feedStarting hook, set before it serves.
	feedStarting func()
	// tapBound is the server's tapBound (0: feedTapBound; negative: the feed reads every event from the log).
	tapBound int
}

func newFixture(t testing.TB, fo fixtureOpts) *fixture {
	t.Helper()
	f := &fixture{t: t, errc: make(chan error, 1)}
	f.clock.Store(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC).UnixNano())
	fs := fo.fs
	if fs == nil {
		fs = vfs.NewMem()
	}
	dir, lo := "db", &eventlog.Options{FS: fs}
	if fo.uncached {
		lo.CacheSize, lo.MemTableSize = 1, 1<<12
	}
	if fo.disk {
		dir, lo = filepath.Join(t.TempDir(), "store"), nil
	}
	l, err := eventlog.Open(dir, lo)
	require.NoError(t, err)
	f.dir = dir
	var n atomic.Int64
	cfg := projections.DefaultConfig()
	if fo.config != nil {
		cfg = *fo.config
	}
	f.cfg = cfg
	eo := commands.Options{
		Clock:          func() time.Time { return time.Unix(0, f.clock.Add(int64(time.Millisecond))) },
		NewID:          func() string { return fmt.Sprintf("%08d", n.Add(1)) },
		Config:         &cfg,
		ExpiryInterval: -1,
		SnapshotEvery:  fo.snapshotEvery,
		Space:          fo.space,
	}
	eo.NoViews = fo.noViews
	if fo.cold {
		eo.Retention, eo.ColdCache = -1, 1
	}
	eng, err := commands.Open(l, eo)
	require.NoError(t, err)
	f.log, f.eng = l, eng
	o := fo.opts
	if o.SocketPath == "" {
		o.SocketPath = filepath.Join(brokertest.SocketDir(t), "d", "b.sock")
	}
	if o.AdminDigest == "" {
		o.AdminDigest = digestOf(testAdminToken)
	}
	if o.ServerKey == nil {
		o.ServerKey = []byte("0123456789abcdef0123456789abcdef")
	}
	if o.SessionID == "" {
		o.SessionID = "test"
	}
	if o.Logger == nil {
		o.Logger = slog.New(panicCounter(&f.panics))
	}
	srv, err := New(eng, l, o)
	require.NoError(t, err)
	if fo.write > 0 {
		srv.writeTimeout = fo.write
	}
	require.NoError(t, srv.Listen())
	srv.feedStarting = fo.feedStarting
	srv.tapBound = fo.tapBound
	f.srv = srv
	go func() { f.errc <- srv.Serve(context.Background()) }()
	t.Cleanup(f.close)
	return f
}

func (f *fixture) close() {
	if f.srv == nil {
		return
	}
	require.Zero(f.t, f.panics.Load(), "the server recovered from a panic")
	closed := make(chan error, 1)
	go func() { closed <- f.srv.Close() }()
	require.NoError(f.t, recv(f.t, closed, "return from the server's Close"))
	require.NoError(f.t, recv(f.t, f.errc, "return from Serve once the server closed"))
	f.eng.Close()
	f.log.Close()
	f.srv = nil
}

// client is a raw NDJSON client of the fixture's socket.
type client struct {
	t       testing.TB
	nc      net.Conn
	rd      *wire.Reader
	pending [][]byte // frames read but not yet matched
	n       int
	// idPrefix, when set, opens the id of every request, which is then written with HTML's characters, U+2028 and
	// U+2029 unescaped: a request of the smallest frame still carries an id whose answer escapes it in six bytes a
	// character.
	idPrefix string
}

func (f *fixture) dial() *client { return f.dialAs(f.t) }

// dialAs connects on behalf of t (a subtest or a fuzz target, which must not use the fixture's own T).
func (f *fixture) dialAs(t testing.TB) *client {
	t.Helper()
	nc, err := net.Dial("unix", f.srv.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	return &client{t: t, nc: nc, rd: wire.NewReader(nc, wire.MaxFrameCeiling)}
}

func (c *client) sendLine(line string) {
	c.t.Helper()
	c.nc.SetWriteDeadline(time.Now().Add(guard))
	_, err := c.nc.Write([]byte(line + "\n"))
	require.NoError(c.t, err)
}

// read returns the next frame from the socket (not the pending buffer).
func (c *client) read() ([]byte, error) {
	c.nc.SetReadDeadline(time.Now().Add(guard))
	f, err := c.rd.ReadFrame()
	if err != nil {
		return nil, err
	}
	return append([]byte(nil), f...), nil
}

// call sends a request and returns the response with its id, skipping (and keeping) pushes.
func (c *client) call(method string, params any) wire.Response {
	c.t.Helper()
	c.n++
	id := fmt.Sprintf("%sc%d", c.idPrefix, c.n)
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(c.idPrefix == "")
	if c.idPrefix == "" {
		require.NoError(c.t, enc.Encode(map[string]any{"id": id, "method": method, "params": params}))
		c.sendLine(strings.TrimSuffix(b.String(), "\n"))
	} else {
		// NB: the id is spliced in as it is (its keys sort first): an encoder would escape U+2028 in six bytes.
		require.NoError(c.t, enc.Encode(map[string]any{"id": "", "method": method, "params": params}))
		c.sendLine(strings.Replace(strings.TrimSuffix(b.String(), "\n"), `"id":""`, `"id":"`+id+`"`, 1))
	}
	for {
		f, err := c.read()
		require.NoError(c.t, err, "waiting for the answer to %s", method)
		var probe struct {
			ID *string `json:"id"`
		}
		require.NoError(c.t, json.Unmarshal(f, &probe))
		if probe.ID == nil || *probe.ID != id {
			c.pending = append(c.pending, f)
			continue
		}
		var r wire.Response
		require.NoError(c.t, json.Unmarshal(f, &r))
		return r
	}
}

// ok calls and requires a result, decoded into a map.
func (c *client) ok(method string, params any) map[string]any {
	c.t.Helper()
	return c.result(method, c.call(method, params))
}

// result requires r, the answer to method, to be a result, and returns it decoded into a map.
func (c *client) result(method string, r wire.Response) map[string]any {
	c.t.Helper()
	require.Nil(c.t, r.Error, "%s failed", method)
	var m map[string]any
	require.NoError(c.t, json.Unmarshal(r.Result, &m))
	return m
}

// fails calls and requires an error with code.
func (c *client) fails(method string, params any, code wire.Code) *wire.Error {
	c.t.Helper()
	r := c.call(method, params)
	require.NotNil(c.t, r.Error, "%s: expected %s, got result %s", method, code, r.Result)
	require.Equal(c.t, code, r.Error.Code, "%s: %s", method, r.Error.Message)
	return r.Error
}

// untilError reads frames until an error frame, keeping the others in pending, and returns it.
func (c *client) untilError() wire.Response {
	c.t.Helper()
	for {
		f, err := c.read()
		require.NoError(c.t, err, "waiting for an error frame")
		var r wire.Response
		if json.Unmarshal(f, &r) == nil && r.Error != nil {
			return r
		}
		c.pending = append(c.pending, f)
	}
}

// closed requires the server to close the connection, with no frame before the end.
func (c *client) closed() {
	c.t.Helper()
	f, err := c.read()
	require.Error(c.t, err, "expected close, got frame %s", f)
	require.True(c.t, isEOF(err), "expected EOF, got %v", err)
}

// isEOF accepts the ways a closed unix socket ends a read: EOF, or a reset when the server closed with our
// bytes unread.
func isEOF(err error) bool { return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) }

// hello authenticates as a run-scoped credential.
func (c *client) hello(runID, taskID, token string) {
	c.t.Helper()
	c.ok("hello", map[string]any{"protocol": 1, "runId": runID, "taskId": taskID, "token": token})
}

func (c *client) helloAdmin() {
	c.t.Helper()
	c.ok("hello", map[string]any{"protocol": 1, "role": "admin", "token": testAdminToken})
}

// seeded is the standard run: R1 running, tasks P (executor) and Q (reviewer) running, with their tokens.
type seeded struct {
	orch, p, q string
}

const (
	runR  = "R1"
	taskP = "P"
	taskQ = "Q"
)

func (f *fixture) seed() seeded {
	f.t.Helper()
	a := f.dial()
	a.helloAdmin()
	res := a.ok("run.create", map[string]any{"runId": runR, "team": "t", "goal": "g", "cwd": "/w"})
	var s seeded
	s.orch = res["orchestratorToken"].(string)
	o := f.dial()
	o.hello(runR, "orchestrator", s.orch)
	o.ok("run.transition", map[string]any{"to": "running"})
	for _, task := range []struct{ id, role string }{{taskP, "executor"}, {taskQ, "reviewer"}} {
		o.ok("task.create", map[string]any{"taskId": task.id, "role": task.role, "agent": "a", "title": task.id,
			"cwd": "/w/" + task.id, "stepId": "s" + task.id, "model": "anthropic/m1"})
		o.ok("task.transition", map[string]any{"taskId": task.id, "to": "running"})
	}
	s.p = o.ok("credential.issue", map[string]any{"taskId": taskP})["token"].(string)
	s.q = o.ok("credential.issue", map[string]any{"taskId": taskQ})["token"].(string)
	a.nc.Close()
	o.nc.Close()
	f.awaitRunConns(runR, 0)
	return s
}

// awaitRunConns waits until the server counts n connections bound to runID: it learns of a client's close only
// when its reader sees it, and a test of the per-run limit must not count the seed's connections.
func (f *fixture) awaitRunConns(runID string, n int) {
	f.t.Helper()
	require.Eventually(f.t, func() bool {
		f.srv.mu.Lock()
		defer f.srv.mu.Unlock()
		return len(f.srv.byRun[runID]) == n
	}, guard, time.Millisecond, "connections of run %s", runID)
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// streamUsage commits n task.usage events on run R from 8 goroutines and
// returns how long that took: a steady stream of small commits for the
// back-pressure tests.
func (f *fixture) streamUsage(tb testing.TB, n int) time.Duration {
	return f.streamUsageOn(tb, runR, taskQ, n)
}

// streamUsageOn is streamUsage on task taskID of run runID.
func (f *fixture) streamUsageOn(tb testing.TB, runID, taskID string, n int) time.Duration {
	start := time.Now()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += 8 {
				r, err := f.eng.Submit(context.Background(), commands.Request{
					Actor:   events.Actor{Role: events.RoleOrchestrator},
					Command: &commands.TaskUsage{RunID: runID, TaskID: taskID, Input: int64(i), Output: 1},
				})
				if err != nil || r.Rejected != nil {
					tb.Errorf("usage %d: %v %v", i, err, r.Rejected)
					return
				}
			}
		}()
	}
	awaitGroup(tb, &wg, "end of the usage submitters")
	return time.Since(start)
}

// cursorsSeen is the cursors a test's list reader followed: a nextCursor that is empty starts the list again, and
// one seen before reads its pages again, so a reader following either would never end and the test fail only by
// the package's timeout; follow fails it at once instead.
type cursorsSeen map[string]bool

// follow requires next, the cursor the page just read of list handed on, to name a page not read yet.
func (seen cursorsSeen) follow(t testing.TB, next, list string) {
	t.Helper()
	require.NotEmpty(t, next, "%s: a nextCursor that names no page", list)
	require.False(t, seen[next], "%s: a nextCursor that names a page read already: %.60q", list, next)
	seen[next] = true
}

// wideOpen are options whose per-principal limits let one credential hold thousands of connections, waits and
// subscriptions: for tests that measure what many clients cost, not the limits themselves.
func wideOpen() Options {
	return Options{MaxConns: 8192, MaxConnsPerCredential: 8192, MaxConnsPerRun: 8192, MaxPendingPerPeer: 8192, MaxWaitsPerCredential: 1 << 20,
		MaxSubscriptionsPerCredential: 8192}
}

// medianPing is the median latency of n pings on c.
func medianPing(c *client, n int) time.Duration {
	lat := make([]time.Duration, n)
	for i := range lat {
		start := time.Now()
		c.ok("ping", nil)
		lat[i] = time.Since(start)
	}
	slices.Sort(lat)
	return lat[n/2]
}

// seedRun creates run runID, running, with one running task taskID, and returns its orchestrator token.
func (f *fixture) seedRun(runID, taskID string) string {
	f.t.Helper()
	a := f.dial()
	a.helloAdmin()
	orch := a.ok("run.create", map[string]any{"runId": runID, "team": "t", "goal": "g", "cwd": "/w"})["orchestratorToken"].(string)
	o := f.dial()
	o.hello(runID, events.OrchestratorKey, orch)
	o.ok("run.transition", map[string]any{"to": "running"})
	o.ok("task.create", map[string]any{"taskId": taskID, "role": "executor", "agent": "a", "title": taskID,
		"cwd": "/w/" + taskID, "stepId": "s" + taskID, "model": "anthropic/m1"})
	o.ok("task.transition", map[string]any{"taskId": taskID, "to": "running"})
	a.nc.Close()
	o.nc.Close()
	f.awaitRunConns(runID, 0)
	return orch
}

// lastVersion is the version of the last event of stream runID the log holds.
func (f *fixture) lastVersion(runID string) uint64 {
	f.t.Helper()
	var last uint64
	it := f.log.ReadStream(runID, 1)
	for it.Next() {
		last = it.Event().StreamVersion
	}
	require.NoError(f.t, it.Close())
	return last
}

// serverSubscription is the server side of the subscription of task taskID's connection (there must be one).
func (f *fixture) serverSubscription(taskID string) *subscription {
	f.t.Helper()
	f.srv.mu.Lock()
	defer f.srv.mu.Unlock()
	for c := range f.srv.conns {
		c.mu.Lock()
		sub := c.sub
		c.mu.Unlock()
		if c.id.taskID == taskID && sub != nil {
			return sub
		}
	}
	f.t.Fatalf("no subscription for task %s", taskID)
	return nil
}

// untilResync reads the pushes c was sent (those already read first), passing each one before the resync frame to
// onEvent, and returns the resync.
func (c *client) untilResync(onEvent func(wire.Event)) wire.Resync {
	c.t.Helper()
	for {
		fr := c.nextFrame()
		var ev wire.Event
		require.NoError(c.t, json.Unmarshal(fr, &ev))
		if ev.Name == wire.EventResync {
			var r wire.Resync
			require.NoError(c.t, json.Unmarshal(fr, &r))
			return r
		}
		onEvent(ev)
	}
}

// nextFrame returns the next frame c was sent: the first of those already read, else the next from the socket.
func (c *client) nextFrame() []byte {
	c.t.Helper()
	if len(c.pending) > 0 {
		fr := c.pending[0]
		c.pending = c.pending[1:]
		return fr
	}
	fr, err := c.read()
	require.NoError(c.t, err)
	return fr
}
