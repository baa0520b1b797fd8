package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// TestProtocolErrorsMatchServer: every code a command method answers over the socket is one docs/protocol.json lists
// for it, or one any request may meet (a closing code). A client generated from the description switches on those
// lists, so a code the server answers and the description leaves out is a case that client never handles.
//
// Every command method is called by each role (the worker P, the orchestrator, the admin) with params that would
// be accepted (errorsBase), then, by each role it admits, with each params key, one at a time, left out or set to
// each value of errorCorpus, and with params that are no object; and again with its accepted params in states that
// refuse them otherwise (errorStates, commandStates): the run at its events quota, at its message-bytes quota, past
// its message rate, the disk full, the engine stopped, nesting and the wait methods off, and the manager's grant
// changed. A revoked credential's connection ends, with a closing code. A code a description lists that no request
// answered fails the test too, unless unreachedCodes says why none can: the description lists what a method can
// answer, no more.
func TestProtocolErrorsMatchServer(t *testing.T) {
	methods := describedMethods(t, true)
	seen := codesSeen{}

	// The corpus: each key of each method, from each role, on a crew of its own (a revocation or a run ended by
	// one request would leave the rest of the method's corpus nothing to reach).
	for _, m := range methods {
		e := newErrorsCrew(t, fixtureOpts{})
		for _, role := range errorRoles {
			call := func(params any) *wire.Error { return e.call(role, m.Name, params) }
			seen.drive(e, m, role, errorsBase(m.Name, e.ids), call)
		}
	}

	// Accepted params in states that refuse them, each state on a crew of its own (a new one when a request spoiled
	// it): a winding-down command a quota lets through changes the crew, and the rest are refused all the same.
	for _, st := range append(errorStates(t), commandStates...) {
		var e *errorsCrew
		for _, m := range methods {
			if st.methods != nil && !slices.Contains(st.methods, m.Name) {
				continue
			}
			for _, role := range errorRoles {
				if e == nil || e.spoiled() {
					e = newErrorsCrew(t, st.opts)
					if st.apply != nil {
						st.apply(e)
					}
				}
				base := errorsBase(m.Name, e.ids)
				if st.params != nil {
					st.params(e, m.Name, base)
				}
				seen.observe(m.Name, base, e.call(role, m.Name, base), st.name)
				if st.twice && !e.spoiled() {
					seen.observe(m.Name, base, e.call(role, m.Name, base), st.name+", sent again")
				}
			}
		}
	}
	// A revocation ends the credential's open connections at once, before any request of theirs is served: what a
	// request meets then is the connection's end, a closing code any request may meet.
	e := newErrorsCrew(t, fixtureOpts{})
	for _, role := range []string{events.RoleWorker, events.RoleOrchestrator} {
		e.revoke(role)
		end := e.conns[role].untilError()
		require.True(t, end.Error.Code.Closes(), "%s revoked: %s", role, end.Error.Code)
	}

	seen.requireListedAnswered(t, methods)
	seen.requireDescribed(t, methods)
	// The corpus reaches the refusals it is meant to: were it to stop reaching them, the test could not fail.
	seen.requireReached(t, map[string][]wire.Code{"task.usage": {wire.CodeQuotaExceeded}, "msg.send": {wire.CodeRateLimit},
		"delegate.request": {wire.CodePolicyDenied, wire.CodePolicyDisabled}, "task.create": {wire.CodeDiskFull},
		"task.transition": {wire.CodeNoTask, wire.CodeQuotaExceeded}, "run.create": {wire.CodeForbidden},
		"credential.issue": {wire.CodeInternal}, "wait.request": {wire.CodePolicyDisabled},
		"wait.resolve": {wire.CodePolicyDisabled, wire.CodeQuotaExceeded}, "job.transition": {wire.CodeQuotaExceeded},
		"manifest.revalidate": {wire.CodePolicyDenied}})
}

// describedMethods are the methods of the protocol description that are engine commands (command) or not.
func describedMethods(t *testing.T, command bool) []methodDesc {
	d, err := Describe()
	require.NoError(t, err)
	var out []methodDesc
	for _, m := range d.Methods {
		if m.Command == command {
			out = append(out, m)
		}
	}
	require.NotEmpty(t, out)
	return out
}

// codesSeen is, for each method, every code it answered and the first request that answered it.
type codesSeen map[string]map[wire.Code]string

func (s codesSeen) observe(method string, params any, e *wire.Error, state string) {
	if e == nil {
		return
	}
	if s[method] == nil {
		s[method] = map[wire.Code]string{}
	}
	if _, ok := s[method][e.Code]; !ok {
		s[method][e.Code] = fmt.Sprintf("%s %v: %s", state, params, e.Message)
	}
}

// drive calls m as role with base, params it would accept, then, when m admits role, with each params key left out
// or set to each value of errorCorpus (which names the objects of e, the crew call sends to, and may replace), and
// with params that are no object at all. It returns the answer to base.
func (s codesSeen) drive(e *errorsCrew, m methodDesc, role string, base map[string]any,
	call func(params any) *wire.Error) *wire.Error {
	baseErr := call(base)
	s.observe(m.Name, base, baseErr, "base")
	if !slices.Contains(m.Roles, role) {
		return baseErr // refused for its role before its params are read
	}
	for _, p := range m.Params {
		for _, v := range append([]any{absent{}}, errorCorpus(e.ids)...) {
			params := maps.Clone(base)
			if _, gone := v.(absent); gone {
				delete(params, p.Name)
			} else {
				params[p.Name] = v
			}
			s.observe(m.Name, params, call(params), "corpus")
		}
	}
	for _, v := range []any{true, 1, "x", []any{}, []any{base}} {
		s.observe(m.Name, v, call(v), "params no object")
	}
	return baseErr
}

// requireDescribed fails naming every code a method answered that its description leaves out, closing codes aside.
func (s codesSeen) requireDescribed(t *testing.T, methods []methodDesc) {
	var missing []string
	for _, m := range methods {
		for code, req := range s[m.Name] {
			if !code.Closes() && !slices.Contains(m.Errors, code) {
				missing = append(missing, fmt.Sprintf("%s answered %s (%.300s)", m.Name, code, req))
			}
		}
	}
	sort.Strings(missing)
	require.Empty(t, missing, "codes the server answers that docs/protocol.json does not list (broker/protocol_spec.go)")
}

// requireListedAnswered fails naming every code a method's description lists that no request answered, unless
// unreachedCodes says why none can.
func (s codesSeen) requireListedAnswered(t *testing.T, methods []methodDesc) {
	var unanswered []string
	for _, m := range methods {
		for _, code := range m.Errors {
			_, reached := s[m.Name][code]
			_, known := unreachedCodes[string(code)]
			_, knownHere := unreachedCodes[m.Name+" "+string(code)]
			if !reached && !known && !knownHere {
				unanswered = append(unanswered, m.Name+" "+string(code))
			}
		}
	}
	require.Empty(t, unanswered, "codes docs/protocol.json lists that no request answered: reach them (a state, a "+
		"corpus entry), leave them out (broker/protocol_spec.go), or say in unreachedCodes why no request can")
}

// requireReached requires each method to have answered its codes: were the corpus to stop reaching the refusals it
// is meant to, the test could not fail.
func (s codesSeen) requireReached(t *testing.T, want map[string][]wire.Code) {
	for method, codes := range want {
		for _, code := range codes {
			require.Contains(t, s[method], code, "%s never answered %s", method, code)
		}
	}
}

// unreachedCodes are the codes, listed for a method ("method code") or for every method ("code"), that no request
// of the corpus can meet, and why.
var unreachedCodes = map[string]string{
	string(wire.CodeUnavailable): "a follower of a cluster answers it when no writer does (integration tests)",
	string(wire.CodeReplayFailed): "a log that cannot be read, or a finished run gone cold that it cannot give back " +
		"(cold_read_test.go)",
	"admin.checkpoint internal": "a store whose copy fails",
	"task.waitStatus close":     "the server shutting down during the wait, an answer its connection's end races",
	// A worker's run and task exist while its credential does (neither is ever removed), and the run and task of a
	// worker's command are its credential's; pi-crew's contract lists these codes all the same.
	"delegate.request no-manifest": "SPEC §4.1 step 3: a worker's run always exists",
	"delegate.request no-task":     "SPEC §4.1 step 6: a worker's task always exists",
	"wait.request no-manifest":     "D§7.5: a worker's run always exists",
	"wait.request no-task":         "D§7.5: a worker's task always exists",
	"wait.resolve no-manifest":     "D§7.5 (every run-scoped method): a worker's run always exists",
}

// errorState is a state of the crew that refuses requests it would otherwise accept: opts build the crew, apply,
// when set, puts it in the state, and params, when set, points a request's accepted params at what the state made.
// With twice, each command is sent again: a command the state lets through changes the crew, and a rule refuses it
// the second time (reads change nothing, and are sent once). methods, when set, are the only commands the state
// is met with: the others answer in it as they do without it.
type errorState struct {
	name    string
	opts    fixtureOpts
	apply   func(e *errorsCrew)
	params  func(e *errorsCrew, method string, params map[string]any)
	twice   bool
	methods []string
}

// errorStates are the states every method is called in with its accepted params: the run at its events quota, at
// its message-bytes quota, past its message rate, the disk full, and the engine stopped.
func errorStates(t *testing.T) []errorState {
	return []errorState{
		// A refusal that records only itself counts against the events quota (commands/quota.go), so the quota
		// refuses it too: the wait methods are off (wait.resolve's refusal records policy.action), and each
		// command is sent twice (a job paused, its pause again is refused not-running and records job.rejected).
		{name: "at the events quota", twice: true, apply: func(e *errorsCrew) {
			e.configure(func(c *projections.Config, u projections.RunUsage) {
				c.QuotaEvents, c.WaitMethodsEnabled = u.Events, false
			})
		}},
		{name: "at the message-bytes quota", apply: func(e *errorsCrew) {
			e.configure(func(c *projections.Config, u projections.RunUsage) { c.QuotaBytes = u.MsgBytes })
		}},
		{name: "past the message rate", apply: func(e *errorsCrew) {
			e.configure(func(c *projections.Config, _ projections.RunUsage) { c.QuotaMsgsPerMin = 1 })
		}},
		{name: "disk full", apply: func(e *errorsCrew) { e.disk.full.Store(true) }},
		{name: "engine stopped", apply: func(e *errorsCrew) { require.NoError(t, e.f.eng.Close()) }},
	}
}

// commandStates are the states that refuse a few commands only, besides errorStates: nesting and the wait methods
// switched off (policy-disabled), the manager's grant changed since its job was created, which
// manifest.revalidate refuses (policy-denied), and, in the smallest frame, a request id as wide as an error
// answering it allows, which leaves an answer no room for a result of more than 53 bytes (oversize-frame, before
// anything is recorded). The call r1 waits for its revalidation only in a new crew: the
// corpus revalidates it with its first request, so only a state can reach that refusal.
var commandStates = []errorState{
	{name: "nesting and the wait methods off", methods: []string{"delegate.request", "wait.request", "wait.resolve"},
		apply: func(e *errorsCrew) {
			e.configure(func(c *projections.Config, _ projections.RunUsage) {
				c.NestingEnabled, c.WaitMethodsEnabled = false, false
			})
		}},
	{name: "the manager's grant changed", methods: []string{"manifest.revalidate"},
		params: func(_ *errorsCrew, _ string, params map[string]any) {
			params["tools"] = []any{} // the manager grants nothing now
		}},
	{name: "a result proxy.result could not answer in a frame", methods: []string{"proxy.complete"},
		params: func(_ *errorsCrew, _ string, params map[string]any) {
			params["result"] = map[string]any{"content": []any{map[string]any{"type": "text", "text": strings.Repeat("<", wire.DefaultMaxFrame/7)}}}
		}},
	{name: "the smallest frame, an id as wide as an error allows", opts: fixtureOpts{opts: Options{MaxFrame: wire.MaxFrameFloor}},
		params: func(e *errorsCrew, _ string, _ map[string]any) { e.idWidth = widestAnswerableID }},
}

// widestAnswerableID is the bytes of the widest request id an error answers in the smallest frame: it leaves a
// result 53 bytes.
var widestAnswerableID = wire.MaxFrameFloor - len(errorFrame("", wire.NewError(wire.CodeOversizeFrame, ""), wire.MaxFrameFloor))

// absent stands for a params key left out.
type absent struct{}

var errorRoles = []string{events.RoleWorker, events.RoleOrchestrator, events.RoleAdmin}

// errorCorpus is what each params key is set to in turn: every JSON type, out-of-range numbers, ids of the crew's
// objects and of none, the names a recipient may take, and a string past any bound.
func errorCorpus(ids map[string]string) []any {
	return []any{nil, true, -1, 0, 1.5, 1 << 40, 1e300, "", "x", strings.Repeat("é", 5000), taskP, taskQ, "R2", "J",
		events.OrchestratorKey, "parent", "all", "group", ids["sub"], ids["question"], ids["message"], "r1",
		[]any{}, []any{taskQ}, []any{ids["message"]}, map[string]any{}, testGrant}
}

// errorsCrew is the seeded run R1 with one of each object a command can name: a delegation of P, a question parked
// by Q, a message to P, a job J of P with a lease and a proxied call r1; and a connection for each role.
type errorsCrew struct {
	t     *testing.T
	fo    fixtureOpts
	disk  *diskGauge
	f     *fixture
	s     seeded
	ids   map[string]string
	conns map[string]*client
	// idPrefix opens the id of the next request send sends (once).
	idPrefix string
	// idWidth, when set, is the bytes the answer writes the id of the next request send sends in (once): U+2028s
	// and what more it takes.
	idWidth int
}

// newErrorsCrew is the crew on a fixture of fo (its space aside: the crew's disk is the test's diskGauge).
func newErrorsCrew(t *testing.T, fo fixtureOpts) *errorsCrew {
	disk := &diskGauge{}
	opened := fo
	opened.space = disk
	if opened.opts.DashboardLogin == nil {
		opened.opts.DashboardLogin = func() (string, time.Time, bool) {
			return "http://127.0.0.1:7717/login?code=c", time.Now().Add(time.Minute), true
		}
	}
	f := newFixture(t, opened)
	e := &errorsCrew{t: t, fo: fo, disk: disk, f: f, s: f.seed(), ids: map[string]string{}, conns: map[string]*client{}}
	o, p, q := e.conn(events.RoleOrchestrator), e.conn(events.RoleWorker), f.dial()
	q.hello(runR, taskQ, e.s.q)
	// The delegation's description is as long as it may be, in a char JSON writes in six bytes: its record is as large
	// as a delegation's can be.
	e.ids["sub"] = p.okUnescaped("delegate.request", map[string]any{"prompt": "p", "budgetTokens": 1,
		"description": strings.Repeat("<", commands.MaxDescriptionChars)})["grandchildTaskRef"].(string)
	e.ids["question"] = q.ok("wait.request", map[string]any{"question": "?"})["questionId"].(string)
	e.ids["message"] = o.ok("msg.send", map[string]any{"to": taskP, "body": "hi"})["messageId"].(string) + "_" + taskP
	e.ids["nonce"] = o.ok("job.create", map[string]any{"jobId": "J", "taskId": taskP, "tools": testGrant})["nonce"].(string)
	o.ok("lease.open", map[string]any{"jobId": "J", "mode": "start", "rootToolCallId": "root-1"})
	p.ok("proxy.request", map[string]any{"jobId": "J", "requestId": "r1", "nonce": e.ids["nonce"], "tool": "read"})
	q.nc.Close()
	return e
}

// okUnescaped is ok with the request's JSON written unescaped where json.Marshal would escape HTML's characters in
// six bytes: a request of the smallest frame still carries the longest texts of such chars.
func (c *client) okUnescaped(method string, params any) map[string]any {
	c.t.Helper()
	return c.result(method, c.callUnescaped(method, params))
}

// callUnescaped is call with the request's JSON written unescaped, as okUnescaped sends it.
func (c *client) callUnescaped(method string, params any) wire.Response {
	c.t.Helper()
	c.n++
	id := fmt.Sprintf("c%d", c.n)
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	require.NoError(c.t, enc.Encode(map[string]any{"id": id, "method": method, "params": params}))
	c.sendLine(strings.TrimSuffix(b.String(), "\n"))
	return c.answerOf(id)
}

// helloParams are the hello of role's credential: the worker is task P.
func (e *errorsCrew) helloParams(role string) map[string]any {
	switch role {
	case events.RoleAdmin:
		return map[string]any{"protocol": 1, "role": events.RoleAdmin, "token": testAdminToken}
	case events.RoleOrchestrator:
		return map[string]any{"protocol": 1, "runId": runR, "taskId": events.OrchestratorKey, "token": e.s.orch}
	}
	return map[string]any{"protocol": 1, "runId": runR, "taskId": taskP, "token": e.s.p}
}

// open is the role's connection, dialled (again, after one ended) when needed, or the refusal of its hello.
func (e *errorsCrew) open(role string) (*client, *wire.Error) {
	if c := e.conns[role]; c != nil {
		return c, nil
	}
	c := e.f.dial()
	if r := c.call(wire.MethodHello, e.helloParams(role)); r.Error != nil {
		c.nc.Close()
		return nil, r.Error
	}
	e.conns[role] = c
	return c, nil
}

// conn is the role's connection; its hello must be accepted.
func (e *errorsCrew) conn(role string) *client {
	c, bad := e.open(role)
	require.Nil(e.t, bad, "hello as %s", role)
	return c
}

// call sends one request as role and returns its error. A request that spoiled the crew for the next one
// (revoked the orchestrator's or P's credential, ended the run) has the next request meet a new crew.
func (e *errorsCrew) call(role, method string, params any) *wire.Error {
	if e.spoiled() {
		*e = *newErrorsCrew(e.t, e.fo)
	}
	return e.send(role, method, params)
}

// send sends one request as role on its connection and returns its error, or the refusal of the hello that would
// have opened the connection. A closing answer ends the connection.
func (e *errorsCrew) send(role, method string, params any) *wire.Error {
	c, bad := e.open(role)
	if bad != nil {
		return bad
	}
	c.idPrefix, e.idPrefix = e.idPrefix, ""
	if e.idWidth > 0 {
		w := e.idWidth - len(fmt.Sprintf("c%d", c.n+1)) // call's id: the prefix, then c and its count
		c.idPrefix, e.idWidth = strings.Repeat("\u2028", w/6)+strings.Repeat("i", w%6), 0
	}
	r := c.call(method, params)
	c.idPrefix = ""
	if r.Error != nil && r.Error.Code.Closes() {
		e.drop(role)
	}
	return r.Error
}

// drop closes the role's connection: the next request dials again.
func (e *errorsCrew) drop(role string) {
	if c := e.conns[role]; c != nil {
		c.nc.Close()
		delete(e.conns, role)
	}
}

// spoiled reports whether a request took from the crew what the next one needs: the orchestrator's or P's
// credential, or the run itself (ended).
func (e *errorsCrew) spoiled() (spoiled bool) {
	e.f.eng.Read(func(st *projections.State) {
		run, _ := st.Run(runR)
		o, _ := st.Credential(runR, events.OrchestratorKey)
		p, _ := st.Credential(runR, taskP)
		spoiled = run.Status.Stale() || o.Revoked || p.Revoked
	})
	return spoiled
}

// revoke revokes role's credential (P's, or the orchestrator's) as the admin while role's connection is open.
func (e *errorsCrew) revoke(role string) {
	e.conn(role)
	key := taskP
	if role == events.RoleOrchestrator {
		key = events.OrchestratorKey
	}
	e.conn(events.RoleAdmin).ok("credential.revoke", map[string]any{"runId": runR, "taskId": key})
}

// configure puts a config in force derived from the one in force and run R1's usage.
func (e *errorsCrew) configure(change func(*projections.Config, projections.RunUsage)) {
	var cfg projections.Config
	var usage projections.RunUsage
	e.f.eng.Read(func(st *projections.State) {
		cfg = st.Config()
		run, _ := st.Run(runR)
		usage = run.Usage
	})
	change(&cfg, usage)
	r, err := e.f.eng.Submit(context.Background(), commands.Request{Actor: events.Actor{Role: events.RoleAdmin},
		Command: &commands.Configure{Config: cfg}})
	require.NoError(e.t, err)
	require.Nil(e.t, r.Rejected)
}

// diskGauge is the engine's free-space check, full once the test says so.
type diskGauge struct{ full atomic.Bool }

func (g *diskGauge) CheckSpace() error {
	if g.full.Load() {
		return fmt.Errorf("%w: the test's disk is full", commands.ErrNoSpace)
	}
	return nil
}

// errorsBase is params of method that the crew's orchestrator (or, for a worker's method, P) would have accepted.
func errorsBase(method string, ids map[string]string) map[string]any {
	switch method {
	case "credential.issue":
		return map[string]any{"taskId": taskQ}
	case "credential.revoke":
		return map[string]any{"taskId": taskQ, "reason": "r"}
	case "delegate.cancel":
		return map[string]any{"subId": ids["sub"], "reason": "r"}
	case "delegate.request":
		return map[string]any{"prompt": "p", "budgetTokens": 1}
	case "delegate.settle":
		return map[string]any{"subId": ids["sub"], "outcome": "ok", "text": "t", "usageTokens": 1}
	case "delegate.spawned":
		return map[string]any{"subId": ids["sub"], "pid": 7}
	case "escalate":
		return map[string]any{"to": "parent", "body": "b"}
	case "job.create":
		return map[string]any{"jobId": "J2", "taskId": taskQ, "tools": testGrant}
	case "job.disconnect", "lease.clear":
		return map[string]any{"jobId": "J"}
	case "job.roots_reset":
		return map[string]any{}
	case "job.transition":
		return map[string]any{"jobId": "J", "to": "paused"}
	case "lease.open":
		return map[string]any{"jobId": "J", "mode": "start", "rootToolCallId": "root-2"}
	case "mailbox.ack", "mailbox.deliver":
		return map[string]any{"taskId": taskP, "messageIds": []any{ids["message"]}}
	case "manifest.revalidate":
		return map[string]any{"jobId": "J", "requestId": "r1", "tools": testGrant}
	case "msg.send":
		return map[string]any{"to": taskQ, "body": "b"}
	case "proxy.cancel":
		return map[string]any{"jobId": "J", "requestId": "r1", "nonce": ids["nonce"]}
	case "proxy.complete":
		return map[string]any{"jobId": "J", "requestId": "r1", "nonce": ids["nonce"], "result": map[string]any{"content": []any{}}}
	case "proxy.request":
		return map[string]any{"jobId": "J", "requestId": "r2", "nonce": ids["nonce"], "tool": "read"}
	case "run.create":
		return map[string]any{"runId": "R2", "team": "t", "goal": "g", "cwd": "/w"}
	case "run.transition":
		return map[string]any{"to": "blocked", "reason": "r"}
	case "steer.push":
		return map[string]any{"taskId": taskQ, "body": "b"}
	case "task.create":
		return map[string]any{"taskId": "T", "role": "executor", "agent": "a", "title": "t", "cwd": "/t"}
	case "task.transition":
		return map[string]any{"taskId": taskQ, "to": "queued"} // Q, parked on its question, is retried
	case "task.usage":
		return map[string]any{"taskId": taskQ, "input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0}
	case "wait.request":
		return map[string]any{"question": "q"}
	case "wait.resolve":
		return map[string]any{"questionId": ids["question"]}
	}
	return map[string]any{}
}
