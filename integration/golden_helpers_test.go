package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/client"
	"github.com/crewlog/crewlog/broker/wire"
)

// The golden scenarios of D§12 run over the socket against real crewd processes. A daemon is shared by the
// scenarios that need the same flags, so each scenario works in a run of its own and gives back the slots it
// took (the slot pool is the daemon's, not the run's) before the next one starts.

// goldenDaemons names the daemon configurations the scenarios use. "fixture" is D§12's common fixture: nesting
// on, maxDepth 4, 2 slots, serializeOnPathOverlap off, catalog [anthropic/m1, openai/m2].
var goldenDaemons = map[string][]string{
	"fixture":        {"--model-catalog", "@catalog"},
	"nesting-off":    {"--nesting=false", "--model-catalog", "@catalog"},
	"four-slots":     {"--max-slots", "4", "--model-catalog", "@catalog"},
	"max-depth-2":    {"--max-depth", "2", "--model-catalog", "@catalog"},
	"empty-catalog":  {"--model-catalog", "@empty-catalog"},
	"serialize":      {"--serialize-on-path-overlap", "--model-catalog", "@catalog"},
	"no-grace":       {"--settle-grace", "0s", "--model-catalog", "@catalog"},
	"small-queue":    {"--outbound-queue-cap", "32", "--model-catalog", "@catalog"},
	"restartable":    {"--model-catalog", "@catalog"},
	"unmetered-deny": {"--unmetered-delegates", "deny", "--model-catalog", "@catalog"},
}

// daemonPool starts each configuration on first use and keeps it for the rest of the parent test.
type daemonPool struct {
	parent  *testing.T
	files   map[string]string // @name → file
	daemons map[string]*daemon
}

func newDaemonPool(t *testing.T) *daemonPool {
	crewdBinary(t) // build on the parent's goroutine, so a build failure fails it there
	dir := t.TempDir()
	p := &daemonPool{parent: t, files: map[string]string{}, daemons: map[string]*daemon{}}
	for name, content := range map[string]string{"catalog": "anthropic/m1\nopenai/m2\n", "empty-catalog": ""} {
		f := filepath.Join(dir, name+".txt")
		require.NoError(t, os.WriteFile(f, []byte(content), 0o600))
		p.files["@"+name] = f
	}
	return p
}

// get returns the daemon of configuration name, started, with t as the test it reports to.
func (p *daemonPool) get(t *testing.T, name string) *daemon {
	t.Helper()
	d, ok := p.daemons[name]
	if !ok {
		flags, known := goldenDaemons[name]
		require.True(t, known, "daemon configuration %q", name)
		args := make([]string, len(flags))
		for i, f := range flags {
			if file, isFile := p.files[f]; isFile {
				f = file
			}
			args[i] = f
		}
		d = newDaemon(p.parent, args...)
		p.parent.Cleanup(d.cleanup)
		p.daemons[name] = d
		d.t = t
		d.start()
	}
	d.t = t
	return d
}

// scenario is one golden scenario's run on a daemon: the admin and orchestrator connections that set it up and
// the worker credentials issued in it.
type scenario struct {
	t       *testing.T
	ctx     context.Context
	d       *daemon
	runID   string
	admin   *client.Client
	orch    *client.Client
	orchH   client.Hello
	workers map[string]client.Hello
}

// P is D§12's parent task.
const P = "02_exec"

// newScenario creates run runID (extra run.create params in run), moves it to running, and adds D§12's parent
// P = 02_exec (executor, cwd /w, model anthropic/m1, stepId set), running with a worker credential. The daemon's
// slot pool must be empty: every scenario gives its slots back (drain).
func newScenario(t *testing.T, d *daemon, runID string, run map[string]any) *scenario {
	t.Helper()
	ctx := testContext(t, time.Minute)
	s := &scenario{t: t, ctx: ctx, d: d, runID: runID, workers: map[string]client.Hello{}}
	s.admin = d.mustDial(ctx, adminHello(d))
	params := map[string]any{"runId": runID, "team": "t", "goal": "g", "cwd": "/w"}
	for k, v := range run {
		params[k] = v
	}
	var created runCreated
	s.must(s.admin, "run.create", params, &created)
	require.Equal(t, runID, created.RunID)
	s.orchH = client.Hello{RunID: runID, TaskID: "orchestrator", Token: created.OrchestratorToken}
	s.orch = d.mustDial(ctx, s.orchH)
	s.must(s.orch, "run.transition", map[string]any{"to": "running"}, nil)
	t.Cleanup(s.drain)
	held := s.slots()
	require.Zero(t, held.Held, "the daemon's slot pool is empty before the scenario: %+v", held)
	s.addTask(P, "executor", "/w", map[string]any{"stepId": "exec", "model": "anthropic/m1", "title": "implement"})
	return s
}

// addTask creates a task, starts it and issues its worker credential.
func (s *scenario) addTask(id, role, cwd string, extra map[string]any) client.Hello {
	s.t.Helper()
	params := map[string]any{"taskId": id, "role": role, "agent": role, "title": "task " + id, "cwd": cwd}
	for k, v := range extra {
		params[k] = v
	}
	s.must(s.orch, "task.create", params, nil)
	s.must(s.orch, "task.transition", map[string]any{"taskId": id, "to": "running"}, nil)
	return s.issue(id)
}

// issue issues (or re-issues) the worker credential of task id.
func (s *scenario) issue(id string) client.Hello {
	s.t.Helper()
	var cred struct {
		OK    bool   `json:"ok"`
		Role  string `json:"role"`
		Token string `json:"token"`
	}
	s.must(s.orch, "credential.issue", map[string]any{"taskId": id}, &cred)
	require.True(s.t, cred.OK)
	require.Equal(s.t, "worker", cred.Role)
	require.NotEmpty(s.t, cred.Token)
	h := client.Hello{RunID: s.runID, TaskID: id, Token: cred.Token}
	s.workers[id] = h
	return h
}

// worker dials a connection with task id's worker credential.
func (s *scenario) worker(id string) *client.Client {
	s.t.Helper()
	h, ok := s.workers[id]
	require.True(s.t, ok, "no credential for %s", id)
	return s.d.mustDial(s.ctx, h)
}

// must calls method and requires an answer that is not an error.
func (s *scenario) must(c *client.Client, method string, params, result any) {
	s.t.Helper()
	require.NoError(s.t, c.Call(s.ctx, method, params, result), "%s %v", method, params)
}

// obj calls method and returns its result as a JSON object.
func (s *scenario) obj(c *client.Client, method string, params any) map[string]any {
	s.t.Helper()
	var out map[string]any
	s.must(c, method, params, &out)
	return out
}

// refused calls method, requires the broker's error frame with code (and message, unless empty) and returns it.
func (s *scenario) refused(c *client.Client, method string, params any, code wire.Code, message string) *wire.Error {
	s.t.Helper()
	err := c.Call(s.ctx, method, params, nil)
	var we *wire.Error
	require.True(s.t, errors.As(err, &we), "%s %v: want error %s, got %v", method, params, code, err)
	require.Equal(s.t, code, we.Code, "%s %v: %s", method, params, we.Message)
	if message != "" {
		require.Equal(s.t, message, we.Message, "%s %v", method, params)
	}
	return we
}

// closedBy requires that c's connection ends (its last frame answered a request with a closing code).
func (s *scenario) closedBy(c *client.Client) {
	s.t.Helper()
	select {
	case <-c.Done():
	case <-s.ctx.Done():
		s.t.Fatal("the connection was not closed")
	}
	require.ErrorIs(s.t, c.Call(s.ctx, "ping", nil, nil), client.ErrClosed)
}

// ended requires that the broker ends c's connection, without a request, with one error frame of code and message:
// what a connection gets when its credential is revoked or its run or task ends.
func (s *scenario) ended(c *client.Client, code wire.Code, message string) {
	s.t.Helper()
	select {
	case <-c.Done():
	case <-s.ctx.Done():
		s.t.Fatal("the connection was not ended")
	}
	var we *wire.Error
	require.True(s.t, errors.As(c.Err(), &we), "the connection ended without a final frame: %v", c.Err())
	require.Equal(s.t, code, we.Code, we.Message)
	require.Equal(s.t, message, we.Message)
}

// dialRefused requires that a hello with h is refused with code and message (message "" = any).
func (s *scenario) dialRefused(h client.Hello, code wire.Code, message string) {
	s.t.Helper()
	c, err := s.d.dial(s.ctx, h)
	if c != nil {
		c.Close()
	}
	var we *wire.Error
	require.True(s.t, errors.As(err, &we), "hello %s: want %s, got %v", h, code, err)
	require.Equal(s.t, code, we.Code, "hello %s: %s", h, we.Message)
	if message != "" {
		require.Equal(s.t, message, we.Message)
	}
}

// delegate sends a delegate.request on w that must be admitted, and returns the result.
func (s *scenario) delegate(w *client.Client, params map[string]any) admitted {
	s.t.Helper()
	var adm admitted
	s.must(w, "delegate.request", params, &adm)
	require.True(s.t, adm.OK)
	require.Regexp(s.t, `^gc-[0-9a-f-]{36}$`, adm.GrandchildTaskRef)
	return adm
}

// settle settles delegation sub and returns the result.
func (s *scenario) settle(sub, outcome, text string, extra map[string]any) map[string]any {
	s.t.Helper()
	params := map[string]any{"subId": sub, "outcome": outcome, "text": text}
	for k, v := range extra {
		params[k] = v
	}
	return s.obj(s.orch, "delegate.settle", params)
}

// drain settles every delegation of the run still in flight, so the daemon's slot pool is empty for the next
// scenario. It runs as a cleanup, before the scenario's connections close.
func (s *scenario) drain() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A connection of its own: the scenario's may be closed already (cleanups run last-registered first).
	orch, err := s.d.dial(ctx, s.orchH)
	if err != nil {
		s.t.Errorf("drain %s: %v", s.runID, err)
		return
	}
	defer orch.Close()
	var dels struct {
		Delegations []map[string]any `json:"delegations"`
	}
	if err := orch.Call(ctx, "query.delegations", nil, &dels); err != nil {
		s.t.Errorf("drain %s: %v", s.runID, err)
		return
	}
	for _, d := range dels.Delegations {
		if st := d["status"]; st != "queued" && st != "running" {
			continue
		}
		err := orch.Call(ctx, "delegate.settle", map[string]any{"subId": d["subId"], "outcome": "failed", "text": "scenario over"}, nil)
		// An engine expiry may win the race for a short delegation: it is settled either way.
		if err != nil && !strings.Contains(err.Error(), "already settled") {
			s.t.Errorf("drain %s %v: %v", s.runID, d["subId"], err)
		}
	}
}

// slotsView is query.slots' answer.
type slotsView struct {
	Held     int      `json:"held"`
	Capacity int      `json:"capacity"`
	SubIDs   []string `json:"subIds"`
}

func (s *scenario) slots() slotsView {
	s.t.Helper()
	var v slotsView
	s.must(s.orch, "query.slots", nil, &v)
	return v
}

// requireSlots checks the daemon-wide pool: held/capacity and exactly the subIds given (in any order).
func (s *scenario) requireSlots(capacity int, subIDs ...string) {
	s.t.Helper()
	v := s.slots()
	require.Equal(s.t, len(subIDs), v.Held, "held: %+v", v)
	require.Equal(s.t, capacity, v.Capacity, "capacity: %+v", v)
	if len(subIDs) == 0 {
		require.Empty(s.t, v.SubIDs)
		return
	}
	require.ElementsMatch(s.t, subIDs, v.SubIDs)
}

// tasks returns the run's tasks by id (query.tasks).
func (s *scenario) tasks() map[string]map[string]any {
	s.t.Helper()
	var v struct {
		Tasks []map[string]any `json:"tasks"`
	}
	s.must(s.orch, "query.tasks", nil, &v)
	out := map[string]map[string]any{}
	for _, task := range v.Tasks {
		out[task["id"].(string)] = task
	}
	return out
}

func (s *scenario) task(id string) map[string]any {
	s.t.Helper()
	task, ok := s.tasks()[id]
	require.True(s.t, ok, "task %s in query.tasks", id)
	return task
}

// delegations returns the run's delegations by subId (query.delegations).
func (s *scenario) delegations() map[string]map[string]any {
	s.t.Helper()
	var v struct {
		Delegations []map[string]any `json:"delegations"`
	}
	s.must(s.orch, "query.delegations", nil, &v)
	out := map[string]map[string]any{}
	for _, d := range v.Delegations {
		out[d["subId"].(string)] = d
	}
	return out
}

func (s *scenario) delegation(sub string) map[string]any {
	s.t.Helper()
	d, ok := s.delegations()[sub]
	require.True(s.t, ok, "delegation %s in query.delegations", sub)
	return d
}

// ledger returns the run's accounts (query.ledger).
func (s *scenario) ledger() []map[string]any {
	s.t.Helper()
	var v struct {
		Accounts []map[string]any `json:"accounts"`
	}
	s.must(s.orch, "query.ledger", nil, &v)
	return v.Accounts
}

// teamEvent is the part of a pushed or replayed TeamEvent these tests read.
type teamEvent struct {
	Time     string         `json:"time"`
	Type     string         `json:"type"`
	RunID    string         `json:"runId"`
	TaskID   string         `json:"taskId"`
	Message  string         `json:"message"`
	Data     map[string]any `json:"data"`
	Metadata struct {
		Seq      uint64 `json:"seq"`
		Position uint64 `json:"position"`
	} `json:"metadata"`
}

type sincePage struct {
	Events  []teamEvent `json:"events"`
	NextSeq uint64      `json:"nextSeq"`
	HasMore bool        `json:"hasMore"`
}

// since returns every event of the run after seq (events.since, paged).
func (s *scenario) since(c *client.Client, seq uint64) []teamEvent {
	s.t.Helper()
	var all []teamEvent
	for {
		var page sincePage
		s.must(c, "events.since", map[string]any{"sinceSeq": seq}, &page)
		all = append(all, page.Events...)
		seq = page.NextSeq
		if !page.HasMore {
			return all
		}
	}
}

// head is the seq of the run's last event.
func (s *scenario) head() uint64 {
	s.t.Helper()
	evs := s.since(s.orch, 0)
	for i, ev := range evs {
		require.Equal(s.t, uint64(i+1), ev.Metadata.Seq, "seqs are gapless from 1")
	}
	return uint64(len(evs))
}

// appended returns the events after seq, requiring their types to be types, in order.
func (s *scenario) appended(seq uint64, types ...string) []teamEvent {
	s.t.Helper()
	evs := s.since(s.orch, seq)
	var got []string
	for _, ev := range evs {
		got = append(got, ev.Type)
	}
	require.Equal(s.t, types, got, "events after seq %d", seq)
	return evs
}

// nothingAppended requires that the run's log did not grow after seq.
func (s *scenario) nothingAppended(seq uint64) {
	s.t.Helper()
	s.appended(seq)
}

// fields requires that got has every field of want (a JSON object) with the same value, compared as JSON.
func fields(t *testing.T, got map[string]any, want string) {
	t.Helper()
	var w map[string]any
	require.NoError(t, json.Unmarshal([]byte(want), &w), "want %s", want)
	for k, v := range w {
		require.Contains(t, got, k, "field %q of %v", k, got)
		wb, _ := json.Marshal(v)
		gb, _ := json.Marshal(got[k])
		require.JSONEq(t, string(wb), string(gb), "field %q of %v", k, got)
	}
}

// lacks requires that got has none of keys.
func lacks(t *testing.T, got map[string]any, keys ...string) {
	t.Helper()
	for _, k := range keys {
		require.NotContains(t, got, k, "field %q must be absent from %v", k, got)
	}
}

// inboxMessage is a message of msg.inbox / query.mailbox (pi-crew's MailboxMessage).
type inboxMessage struct {
	ID       string         `json:"id"`
	From     string         `json:"from"`
	To       string         `json:"to"`
	Body     string         `json:"body"`
	Kind     string         `json:"kind"`
	Status   string         `json:"status"`
	Rerouted bool           `json:"rerouted"`
	Data     map[string]any `json:"data"`
	// CreatedAt is ISO-8601 (docs/protocol.md, msg.inbox).
	CreatedAt string `json:"createdAt"`
}

type inboxPage struct {
	Messages []inboxMessage `json:"messages"`
	HasMore  bool           `json:"hasMore"`
	Total    int            `json:"total"`
}

func (s *scenario) inbox(c *client.Client) inboxPage {
	s.t.Helper()
	var p inboxPage
	s.must(c, "msg.inbox", nil, &p)
	return p
}

// cut is s cut to n characters, as the engine cuts a rejection's message for its event (pi-crew's [0:120]).
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) > n {
		r = r[:n]
	}
	return string(r)
}

// fence is the fenced body of a settled delegation (D§6.2).
func fence(sub, label, text string) string {
	return fmt.Sprintf("--- delegate %s (%s) ---\n%s\n--- end delegate %s ---", sub, label, text, sub)
}

// rawConn is a connection without the client: the tests of framing and back-pressure write and read bytes.
type rawConn struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
	next int
}

func dialRaw(t *testing.T, d *daemon) *rawConn {
	t.Helper()
	conn, err := net.Dial("unix", d.socket)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return &rawConn{t: t, conn: conn, r: bufio.NewReaderSize(conn, 1<<20)}
}

// send writes one request frame and returns its id.
func (r *rawConn) send(method string, params any) string {
	r.t.Helper()
	r.next++
	id := fmt.Sprintf("r%d", r.next)
	b, err := json.Marshal(map[string]any{"id": id, "method": method, "params": params})
	require.NoError(r.t, err)
	r.write(append(b, '\n'))
	return id
}

func (r *rawConn) write(b []byte) {
	r.t.Helper()
	require.NoError(r.t, r.conn.SetWriteDeadline(time.Now().Add(10*time.Second)))
	_, err := r.conn.Write(b)
	require.NoError(r.t, err)
}

// rawFrame is any frame the broker sends.
type rawFrame struct {
	ID     string          `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *wire.Error     `json:"error"`
	Event  string          `json:"event"`
	Data   json.RawMessage `json:"data"`
	Seq    *uint64         `json:"seq"`
	raw    []byte
}

// read returns the next frame, or io.EOF-like error when the broker closed the connection. The deadline bounds
// a hung test; it is not what the test measures.
func (r *rawConn) read() (rawFrame, error) {
	require.NoError(r.t, r.conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	line, err := r.r.ReadBytes('\n')
	if err != nil {
		require.Empty(r.t, line, "a partial frame before the close")
		var ne net.Error
		require.False(r.t, errors.As(err, &ne) && ne.Timeout(), "the broker neither answered nor closed: %v", err)
		return rawFrame{}, err
	}
	var f rawFrame
	require.NoError(r.t, json.Unmarshal(line, &f), "frame %s", line)
	f.raw = line
	return f, nil
}

// answer reads frames until the response to id, returning it and the pushes read before it.
func (r *rawConn) answer(id string) (rawFrame, []rawFrame) {
	r.t.Helper()
	var pushes []rawFrame
	for {
		f, err := r.read()
		require.NoError(r.t, err, "waiting for the answer to %s", id)
		if f.Event != "" {
			pushes = append(pushes, f)
			continue
		}
		require.Equal(r.t, id, f.ID, "responses come in request order")
		return f, pushes
	}
}

// closedWithout requires that the broker closes the connection with no (further) frame.
func (r *rawConn) closedWithout() {
	r.t.Helper()
	f, err := r.read()
	require.Error(r.t, err, "want a close without a frame, got %s", f.raw)
}

// closedWith requires that the next frame answers id with code and message, and that the connection then ends.
func (r *rawConn) closedWith(id string, code wire.Code, message string) {
	r.t.Helper()
	f, err := r.read()
	require.NoError(r.t, err, "want the error frame %s before the close", code)
	require.Equal(r.t, id, f.ID, "%s", f.raw)
	require.NotNil(r.t, f.Error, "%s", f.raw)
	require.Equal(r.t, code, f.Error.Code, "%s", f.raw)
	require.Equal(r.t, message, f.Error.Message, "%s", f.raw)
	r.closedWithout()
}

// hello authenticates the raw connection.
func (r *rawConn) hello(h client.Hello) {
	r.t.Helper()
	id := r.send("hello", h)
	f, _ := r.answer(id)
	require.Nil(r.t, f.Error, "hello: %s", f.raw)
}
