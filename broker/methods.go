package broker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// call is one authenticated request being served.
type call struct {
	c      *conn
	id     string // request id
	method string
	params json.RawMessage
	// after runs once the response is queued: events.subscribe starts its pushes there, so the
	// {"subscribed":true} answer always precedes the first team.event.
	after func()
	// async is set by a handler that answers later from its own goroutine (task.waitStatus).
	async bool
}

// read runs fn on the published state if the caller's credential still holds in it, in one read, and returns the
// credential's refusal otherwise. Every read of a broker method goes through it, so none answers from a state in
// which its credential has ended: a page read may have waited for its credential's turn for as long as the client
// kept the turns busy, and the request's own check (serve) was a read of its own.
func (cl *call) read(fn func(st *projections.State)) error {
	var bad *wire.Error
	if cl.c.s.onRead != nil {
		cl.c.s.onRead()
	}
	cl.c.s.eng.Read(func(st *projections.State) {
		if bad = checkCredential(st, cl.c.id); bad == nil {
			fn(st)
		}
	})
	if bad != nil {
		return bad
	}
	return nil
}

// handler serves one method. It returns the result (any JSON-encodable value or json.RawMessage) or an error
// that the mapping table turns into a code.
type handler func(cl *call) (any, error)

// brokerMethods are the methods the broker serves itself; every method of commands.Methods() is served by
// runCommand. Together with hello they are the protocol (docs/protocol.md is checked against Methods()).
var brokerMethods = map[string]handler{
	wire.MethodPing:            handlePing,
	wire.MethodMsgInbox:        handleInbox,
	wire.MethodEventsSince:     handleEventsSince,
	wire.MethodEventsSubscribe: handleSubscribe,
	wire.MethodTaskWaitStatus:  handleWaitStatus,
	"query.run":                handleQueryRun,
	"query.runs":               handleQueryRuns,
	"query.tasks":              handleQueryTasks,
	"query.delegations":        handleQueryDelegations,
	"query.ledger":             handleQueryLedger,
	"query.slots":              handleQuerySlots,
	"query.mailbox":            handleQueryMailbox,
	methodAdminCheckpoint:      handleCheckpoint,
	"query.jobs":               handleQueryJobs,
	"query.job":                handleQueryJob,
	"job.authorize":            handleJobAuthorize,
	methodProxyResult:          handleProxyResult,
	methodImportAppend:         handleImportAppend,
	methodImportCheckpoints:    handleImportCheckpoints,
	methodDashboardLogin:       handleDashboardLogin,
}

// Methods lists every method the server answers, hello included, sorted.
func Methods() []string {
	out := []string{wire.MethodHello}
	for m := range brokerMethods {
		out = append(out, m)
	}
	out = append(out, commands.Methods()...)
	slices.Sort(out)
	return slices.Compact(out)
}

// handle serves one decoded request, which took size bytes of the stream; false means the connection is closing
// and the reader must stop.
func (c *conn) handle(req wire.Request, size int) bool {
	if !c.authed {
		// NB: copied, as every request's were before commands took theirs in place (serve): one request a
		// connection, whose authentication is not worth reasoning about for what it keeps of them.
		req.Params = bytes.Clone(req.Params)
		if req.Method != wire.MethodHello {
			return c.refuseBeforeHello(req, size)
		}
		return c.hello(req, size)
	}
	if !c.begin() {
		return false
	}
	c.charge(requestCost(size))
	if !c.serve(req) {
		return false
	}
	return c.end()
}

// hello serves the connection's hello, which took size bytes of the stream; false means the connection is closing.
func (c *conn) hello(req wire.Request, size int) bool {
	s := c.s
	// The hello waits for its pace, its process's and then its credential's and a worker's run's, until by at most
	// (helloPaceWait): the connection holds a place while it waits, and nothing reads its socket, so a client that
	// has gone would otherwise hold it as long as the debt lasts. A hello that would wait longer is refused.
	wait := helloPaceWait(s.opts.HelloTimeout)
	by := s.pacer.now().Add(wait)
	// A refused hello has no credential to pay for it: its process does (peerKey), and a process whose hellos keep
	// failing has its next ones answered at the pacing rate.
	pk := paceKeys{cred: peerKey(c.peerPID)}
	switch c.paceProcess(pk, by) {
	case paceClosed:
		return false
	case paceLate:
		s.lg.Debug("hello refused", "conn", c.seq, "reason", "its process's pace")
		return c.refuse(req.ID, wire.MethodHello, lateHello(wait))
	}
	id, bad := s.authenticate(req.Params)
	if bad == nil {
		// A hello that would take a place kept for others, or one past its credential's or run's limit, is refused
		// before it waits for its credential's pace (which holds the place it claims), and its process pays, as for
		// a hello its token did not authenticate.
		bad = s.claimPlace(c, id)
	}
	if bad == errConnClosed {
		return false
	}
	if bad != nil {
		s.charge(pk, helloUnits(size))
		s.lg.Debug("hello rejected", "conn", c.seq, "code", string(bad.Code))
		return c.refuseHello(req.ID, bad)
	}
	// A hello costs its credential (and a worker's run) helloUnits, so a token that dials in a loop is paced
	// too.
	k := paceKeys{cred: credKey(id), run: runKey(id)}
	r, ended := c.paceHello(k, id, by)
	switch {
	case ended != nil:
		// Its process pays, as for a late one below.
		s.charge(pk, helloUnits(size))
		s.lg.Debug("hello refused", "conn", c.seq, "code", string(ended.Code), "reason", "its credential ended")
		return c.refuseHello(req.ID, ended)
	case r == paceClosed:
		return false
	case r == paceLate:
		// Its process pays, as for any refused hello; the place is given back as the refusal closes the connection.
		s.charge(pk, helloUnits(size))
		s.lg.Debug("hello refused", "conn", c.seq, "reason", "its credential's pace")
		return c.refuse(req.ID, wire.MethodHello, lateHello(wait))
	}
	if s.onPaced != nil {
		s.onPaced()
	}
	s.charge(k, helloUnits(size))
	ack, bad := c.helloAck(req.ID, id)
	if bad == nil {
		// NB: the idle clock starts before the bind queues the answer: a client that reads it and sends nothing for
		// IdleTimeout is idle then, however late this goroutine arms the timer (startIdleTimer) after the bind.
		c.idleFrom()
		bad = s.bind(c, id, ack)
	}
	if s.onBound != nil {
		s.onBound()
	}
	if bad == errConnClosed {
		return false
	}
	if bad != nil {
		// NB: closed whatever the code (replay-failed: the credential could not be checked again): left open, the
		// connection would keep the place it claimed, and a second hello on it would claim another.
		s.lg.Debug("hello refused", "conn", c.seq, "code", string(bad.Code), "message", bad.Message)
		return c.refuseHello(req.ID, bad)
	}
	// NB: the credential of the identity bound (c.id), not of id: the bind sets a worker's position (Since), by which
	// the writer refuses a command of a run ended and reopened since the broker checked it.
	c.authed, c.keys, c.cred = true, k, c.id.credential()
	c.nc.SetReadDeadline(time.Time{})
	c.in.until = time.Time{}
	c.startIdleTimer()
	s.requests.add(wire.MethodHello, nil)
	s.lg.Debug("hello", "conn", c.seq, "role", id.role, "runId", id.runID, "taskId", id.taskID)
	return true // the answer was queued by the bind
}

// paceHello is paceUntil for a hello that authenticated id and holds the place it claimed: the wait is woken by every
// publish of id's run, and ends as soon as the credential has ended (revoked, re-issued, its run or its task ended),
// with the answer its bind would give (ended). Without it, a hello of an ended credential held its place until its
// pace or helloPaceWait came, and was refused only then (bind): for seconds, the places of a task's re-issued
// credential, which the hellos of its old token held. NB: nothing is read for a hello its pace lets in at once.
func (c *conn) paceHello(k paceKeys, id identity, by time.Time) (r paceResult, ended *wire.Error) {
	if id.runID == "" { // the admin's: not paced
		return c.paceUntil(k, nil, by), nil
	}
	if p := c.s.pacer; p.delay(k, p.now()) <= 0 {
		return paced, nil
	}
	for {
		changed, leave := c.s.eng.RunChanged(id.runID) // NB: before the check: a publish after it wakes the wait
		ended = c.s.recheck(id)
		if ended == nil {
			r = c.paceUntil(k, changed, by)
		}
		leave()
		select {
		case <-c.done:
			return paceClosed, nil
		default:
		}
		if ended != nil || r != paceClosed { // paceClosed, the connection open: its run changed
			return r, ended
		}
	}
}

// refuseBeforeHello answers a connection's first request, not a hello, "hello required", and the connection
// closes. NB: it is paced and charged as a hello its token did not authenticate, by and to its process (peerKey):
// free, it let a process whose refused hellos had put it in debt dial on at full speed with any other first request,
// each a connection set up, a frame of up to MaxFrame read and decoded, and torn down.
func (c *conn) refuseBeforeHello(req wire.Request, size int) bool {
	if !c.payBeforeHello(size) {
		return false
	}
	return c.refuse(req.ID, req.Method, wire.NewError(wire.CodeProtocol, wire.MsgHelloRequired))
}

// payBeforeHello paces a connection refused before its hello, whose first frame took size bytes of the stream, by
// its process's bucket and charges the process helloUnits (paceProcess: not when late), as for a hello its token did
// not authenticate; false means the connection closed meanwhile.
func (c *conn) payBeforeHello(size int) bool {
	pk := paceKeys{cred: peerKey(c.peerPID)}
	switch c.paceProcess(pk, c.s.pacer.now().Add(helloPaceWait(c.s.opts.HelloTimeout))) {
	case paceClosed:
		return false
	case paced:
		c.s.charge(pk, helloUnits(size))
	}
	return true
}

// paceProcess waits until the buckets of pk, a connecting process's, may serve the connection, by at most: one that
// would not by then waits until by and is paceLate. NB: a late one is answered at by, not at once, so that a process
// dialling in a loop still meets back-pressure (MaxPendingPerPeer answers per wait at most), and is not charged, as
// nothing was authenticated: it cost no more than a connection that never says hello, and would only owe more.
func (c *conn) paceProcess(pk paceKeys, by time.Time) paceResult {
	r := c.paceUntil(pk, nil, by)
	if r == paceLate && !c.sleepUntil(by) {
		return paceClosed
	}
	return r
}

// helloAck is the frame that answers hello reqID for identity id, or the error that refuses it when the answer does
// not fit in a frame (an id of U+2028s, which the answer writes in six bytes each).
func (c *conn) helloAck(reqID string, id identity) ([]byte, *wire.Error) {
	ack := wire.HelloAck{Protocol: wire.ProtocolVersion, Session: c.s.opts.SessionID, Run: id.runID, OK: true}
	raw, err := json.Marshal(ack)
	if err != nil {
		c.s.lg.Error("broker: encode result", "method", wire.MethodHello, "err", err)
		return nil, wire.NewError(wire.CodeInternal, "")
	}
	return c.responseFrame(nil, reqID, wire.MethodHello, raw)
}

// refuseHello answers a hello with we and closes the connection, as every refused hello does: a code that leaves
// the connection open after other requests (replay-failed: the token could not be checked) closes it here, with the
// reason of a refused credential, so that a connection never stays open unauthenticated past its answer.
func (c *conn) refuseHello(id string, we *wire.Error) bool {
	c.s.requests.add(wire.MethodHello, we)
	return c.queueError(id, we, true)
}

// MinHelloPaceWait is the least a hello may wait for its pace (helloPaceWait). A credential, or a worker's run, can
// owe seconds after a large replay or a cold run's refold (a page is charged after it is served): its next hello
// waits rather than fails. pi-crew's client gives up on a connection after 5 s: a hello paced longer than that has
// lost its client anyway.
const MinHelloPaceWait = 5 * time.Second

// helloPaceWait is how long a hello may wait for its pace: the hello timeout, and MinHelloPaceWait at least.
func helloPaceWait(helloTimeout time.Duration) time.Duration {
	return max(helloTimeout, MinHelloPaceWait)
}

// lateHello is the refusal of a hello that would wait longer than wait for its pace: a connection limit
// (too-many-connections), as the place it would hold that long is one, and a client may retry such a refusal later.
func lateHello(wait time.Duration) *wire.Error {
	return wire.Errorf(wire.CodeTooManyConnections, "hello paced: it would wait over %v for its pace", wait)
}

// sleepUntil waits until by, or the connection's close (false).
func (c *conn) sleepUntil(by time.Time) bool {
	d := by.Sub(c.s.pacer.now())
	if d <= 0 {
		return true
	}
	if c.s.pacer.onWait != nil {
		c.s.pacer.onWait()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.done:
		return false
	}
}

// serve answers one request of an authenticated connection; false means the connection is closing.
func (c *conn) serve(req wire.Request) bool {
	if req.Method == wire.MethodHello {
		return c.refuse(req.ID, req.Method, wire.NewError(wire.CodeProtocol, wire.MsgHelloCompleted))
	}
	if bad := c.s.recheck(c.id); bad != nil {
		return c.refuse(req.ID, req.Method, bad)
	}
	h, ok := brokerMethods[req.Method]
	if !ok {
		// NB: a command needs no call, and its answer is the engine's, sent as it is rather than made an interface
		// value first: an allocation each, per command. Its params are taken in place, as the reader read them: a
		// command is parsed and submitted before the reader reads on, and its parse copies what it keeps.
		raw, err := runCommand(c, req.ID, req.Method, req.Params)
		if err != nil {
			return c.respond(req.ID, req.Method, nil, err)
		}
		return c.answerCommand(req.ID, req.Method, raw)
	}
	// NB: the call keeps its params (a waiter answering later): their own, not the reader's buffer.
	cl := &call{c: c, id: req.ID, method: req.Method, params: bytes.Clone(req.Params)}
	var (
		result any
		err    error
	)
	if pageRead(req.Method) {
		result, err = c.readPage(cl, h)
	} else {
		result, err = h(cl)
	}
	if err == errConnClosed {
		// Closed by another goroutine while the handler served it (events.subscribe, as it counts its subscription):
		// as for a hello's place and bind, nothing is sent, since the queue may not be closed yet (close runs forget
		// first) and close is not among the method's errors.
		return false
	}
	if cl.async {
		return true
	}
	ok = c.respond(req.ID, req.Method, result, err)
	if ok && cl.after != nil {
		cl.after()
	}
	return ok
}

// caller is the commands.Caller of the connection.
func (c *conn) caller() commands.Caller {
	return commands.Caller{Role: c.id.role, RunID: c.id.runID, TaskID: c.id.taskID}
}

// principal is whose command ids the connection's are (SPEC §2): always its authenticated identity, never anything
// it sends, so no client reaches another principal's ids or the engine's.
func (id identity) principal() events.Principal {
	switch id.role {
	case events.RoleAdmin:
		return events.AdminPrincipal()
	case events.RoleOrchestrator:
		return events.OrchestratorPrincipal(id.runID)
	}
	return events.WorkerPrincipal(id.runID, id.taskID)
}

func handlePing(*call) (any, error) {
	return map[string]any{"pong": true, "protocol": wire.ProtocolVersion}, nil
}

// runCommand serves every engine command of request id: strip commandId, ParseCommand, mint a secret where the
// command records a credential, Submit, and add the secret to the answer of the caller that asked for it. The
// engine is told how large a result the answer's frame can carry: one larger is refused before anything is
// recorded (oversize-frame), rather than committed and then not answered — a run whose orchestrator token is lost.
// NB: params are the reader's buffer (ReadRequestInPlace): nothing of them is kept past the return, the parse
// copying what the command keeps.
func runCommand(c *conn, id, method string, params json.RawMessage) (json.RawMessage, error) {
	// The connection's map is taken while it is filled: a request refused before it is given back (a bad commandId
	// after the keys of every command) leaves the connection none, rather than the map that request grew.
	reuse := c.members
	c.members = nil
	commandID, members, err := splitParams(method, params, reuse)
	if err != nil {
		return nil, err
	}
	var cmd commands.Command
	if members != nil {
		cmd, err = commands.ParseMembers(method, members, c.caller())
		c.members = reusable(members)
	} else {
		cmd, err = commands.ParseCommand(method, params, c.caller()) // it answers params that are no object
	}
	if err != nil {
		return nil, err
	}
	// NB: a request measured too large for its readers is refused by the engine when its command id has no outcome,
	// rather than here: a retry of one recorded is answered that outcome, whatever the mailboxes it reaches now or
	// the frame crewd was restarted with.
	var refused error
	switch x := cmd.(type) {
	case *commands.MessageSend, *commands.Escalate:
		refused = c.messageFits(x)
	case *commands.DelegateSettle:
		c.fitResult(x)
	case *commands.ProxyComplete:
		refused = c.resultFits(x)
	case *commands.ProxyRequest:
		refused = c.argsFit(x, commandID)
	}
	if refused != nil && commandID == "" {
		return nil, refused
	}
	var (
		token, tokenField, tokenRun, tokenKey string
	)
	principal := c.id.principal()
	// NB: the nonce only where a secret is minted: it is built of strings, and every other command would pay for it.
	switch x := cmd.(type) {
	case *commands.RunCreate:
		tokenField, tokenRun, tokenKey = "orchestratorToken", x.RunID, events.OrchestratorKey
		if token, err = mintToken(c.s.opts.ServerKey, tokenRun, tokenKey, tokenNonce(principal, commandID)); err != nil {
			return nil, err
		}
		x.OrchestratorDigest = digestOf(token)
	case *commands.CredentialIssue:
		tokenField, tokenRun, tokenKey = "token", x.RunID, x.TaskID
		if token, err = mintToken(c.s.opts.ServerKey, tokenRun, tokenKey, tokenNonce(principal, commandID)); err != nil {
			return nil, err
		}
		x.Digest = digestOf(token)
	case *commands.JobCreate:
		// The job's nonce (D§9 T7) is a secret like a token: derived the same way, under a key no task id can
		// spell (task ids are [A-Za-z0-9_-]), answered once, kept in the log as its digest.
		tokenField, tokenRun, tokenKey = "nonce", x.RunID, jobNonceKey(x.JobID)
		if token, err = mintToken(c.s.opts.ServerKey, tokenRun, tokenKey, tokenNonce(principal, commandID)); err != nil {
			return nil, err
		}
		x.NonceDigest = digestOf(token)
	}
	room := wire.ResultRoom(id, c.s.opts.MaxFrame)
	if token != "" {
		room -= len(`,"":`) + len(tokenField) + jsonLen(token)
	}
	reply, err := c.s.eng.Submit(c.ctx, commands.Request{Principal: principal, CommandID: commandID,
		Actor: principal.Actor(), Command: cmd, MaxResultBytes: max(room, 1), Credential: c.cred, Refused: refused})
	if ended, ok := err.(*commands.CredentialEndedError); ok { // NB: as Submit returns it, and no allocation when nil
		return nil, credentialEndedAnswer(ended.End)
	}
	if errors.Is(err, commands.ErrResultTooLarge) {
		return nil, fmt.Errorf("%w: %s; nothing was recorded: send it again with a shorter request id", errTooLarge, method)
	}
	if err != nil {
		return nil, err
	}
	if reply.Rejected != nil {
		return nil, reply.Rejected
	}
	if token == "" {
		return reply.Result, nil
	}
	res, err := withToken(c, reply, tokenField, token, tokenRun, tokenKey)
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}

// withToken adds the minted secret to the answer. A command decided now recorded that secret's digest, so it is
// answered as it is, even when a request decided right after it has re-issued the credential (two issues of one
// task in one group, say): it was issued, then replaced. A replayed outcome is answered the secret only after
// checking that it is the secret the recorded credential holds. NB: a replayed outcome is the same principal's
// answer to the same request (same fingerprint, which covers the digest we derived), so the derivation matches what
// was recorded — except when the credential has been re-issued or revoked since, or the outcome predates
// fingerprints (format 3) and so may have answered another request under that id. In those cases our derivation is
// not the credential's secret and must not be handed out as if it were.
func withToken(c *conn, reply commands.Reply, field, token, runID, key string) (map[string]json.RawMessage, error) {
	var res map[string]json.RawMessage
	if err := json.Unmarshal(reply.Result, &res); err != nil {
		return nil, fmt.Errorf("broker: decode engine result: %w", err)
	}
	if runID == "" { // run.create minted the run id
		if err := json.Unmarshal(res["runId"], &runID); err != nil {
			return nil, fmt.Errorf("broker: run.create result without runId: %w", err)
		}
	}
	if !reply.Replayed {
		// NB: decided now, with the digest of this very token: the credential was issued with it, even if a later
		// request has re-issued or revoked it since (its holder's hello is then refused, as after any re-issue).
		t, _ := json.Marshal(token)
		res[field] = t
		return res, nil
	}
	if key != events.OrchestratorKey {
		// NB: a worker's credential and a job's nonce are among the run's records, which a cold run keeps in the log
		// only (the orchestrator's is in its summary): read the run back as a query does (params.run), outside the
		// state's lock, which would hold the writer while it reads, and charged to the caller.
		if err := c.warm(runID); err != nil {
			return nil, err
		}
	}
	var (
		valid bool
		err   error
	)
	if c.s.onRead != nil {
		c.s.onRead()
	}
	c.s.eng.Read(func(st *projections.State) {
		// NB: the run is read again here (its summary, and its records if they left the cache since warm): a read
		// that fails is no credential that is not current, whose answer would have the caller issue it again.
		if job, ok := strings.CutPrefix(key, jobNoncePrefix); ok {
			var h projections.JobHeader
			h, ok, err = st.LookupJobHeader(runID, job)
			valid = ok && sameDigest(h.NonceDigest, digestOf(token))
			return
		}
		var (
			cred projections.Credential
			ok   bool
		)
		cred, ok, err = st.LookupCredential(runID, key)
		valid = ok && !cred.Revoked && sameDigest(cred.Digest, digestOf(token))
	})
	if err != nil {
		return nil, err
	}
	if !valid {
		return nil, wire.NewError(wire.CodeBadParams,
			"commandId was already used for a request whose credential is not current; retry with a new commandId")
	}
	t, _ := json.Marshal(token)
	res[field] = t
	return res, nil
}

// maxCommandID bounds commandId: the log refuses longer ids, and a refused append stops the engine.
const maxCommandID = eventlog.MaxIDLen

// splitParams splits params, valid JSON (DecodeRequest checked the frame), into their members, less the optional
// commandId (ParseMembers refuses unknown keys of crewlog's methods), which it returns. members is nil when params
// are not an object. One scan, no decoding to a map by reflection: every command over the socket takes this path.
// reuse, when not nil, is a map splitParams empties and fills rather than making one (the connection's previous).
//
// members holds the keys some command reads (commandParamKeys), and of every other key only the least: no parse
// reads those, and a strict method's refusal names the least key its parse did not read (ParseMembers), which is
// the least of them or a key some other command reads. NB: a member of every key, a frame's worth of keys a client
// made up (tens of thousands), cost an entry and a string each, megabytes per request before the role was even
// checked, held at once by as many requests as the credential's connections; the keys are compared where they are
// (wire.EachMember), and only the least other one is copied.
func splitParams(method string, params json.RawMessage, reuse map[string]json.RawMessage) (
	commandID string, members map[string]json.RawMessage, err error) {
	var (
		id, least, leastValue []byte
		other                 bool // least holds the least key no command reads
	)
	members = reuse
	if members == nil {
		members = make(map[string]json.RawMessage, 8)
	}
	clear(members)
	if !wire.EachMember(params, func(k, v []byte) {
		switch known, ok := commandParamKeys[string(k)]; { // NB: a lookup by string(bytes) does not allocate
		case known == "commandId":
			id = v // the last one, as a map would keep
		case ok:
			members[known] = v
		case !other || string(k) <= string(least): // NB: the last value of that key, as a map would keep
			least, leastValue, other = append(least[:0], k...), v, true
		}
	}) {
		return "", nil, nil
	}
	if other {
		members[string(least)] = leastValue
	}
	if id != nil && string(id) != "null" {
		if id[0] != '"' || !unquote(id, &commandID) || commandID == "" || len(commandID) > maxCommandID {
			return "", nil, badParams(method, "commandId must be a string of 1..%d bytes", maxCommandID)
		}
		if wire.HoldsLoneSurrogate(id) {
			// NB: decoded, it holds U+FFFD there, and two ids its client holds apart would be one: the second
			// request answered the first's outcome, or refused as a reuse (wire.HoldsLoneSurrogate).
			return "", nil, badParams(method, msgLoneSurrogate)
		}
	}
	return commandID, members, nil
}

// maxReusedMembers is the most params a connection's map of members is kept for its next command with: the
// commands' own have a dozen at most.
const maxReusedMembers = 32

// reusable returns members, emptied, for the connection's next command, or nil when it held more than
// maxReusedMembers: a map grows and never shrinks, and one a client filled with the keys of every command (splitParams
// keeps those, and one other) is not kept for the connection's life. Emptied, so that an idle connection does not keep its last request's values (a prompt of up to
// a frame) alive: ParseMembers has returned, and what it kept it copied.
func reusable(members map[string]json.RawMessage) map[string]json.RawMessage {
	if len(members) > maxReusedMembers {
		return nil
	}
	clear(members)
	return members
}

// commandParamKeys are the params keys every command method reads, and commandId, each mapped to itself: splitParams
// gives a key spelled as one of them as this string, not a copy per request.
var commandParamKeys = func() map[string]string {
	keys := map[string]string{"commandId": "commandId"}
	for _, m := range commands.Methods() {
		info, _ := commands.DescribeMethod(m)
		for _, p := range info.Params {
			keys[p.Name] = p.Name
		}
	}
	return keys
}()

// unquote decodes the JSON string s into *dst, without the decoder when it holds no escape.
func unquote(s []byte, dst *string) bool {
	if len(s) >= 2 && bytes.IndexByte(s, '\\') < 0 && utf8.Valid(s) {
		*dst = string(s[1 : len(s)-1])
		return true
	}
	return json.Unmarshal(s, dst) == nil
}
