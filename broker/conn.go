package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
)

// closeReason says why a connection ended; it is logged at debug (nats client.go's ClosedState).
type closeReason int

const (
	reasonUnknown      closeReason = iota
	reasonClientClosed             // EOF at a frame boundary
	reasonReadError                // the socket failed, or EOF inside a frame
	reasonOversize                 // a line over the frame cap
	reasonMalformed                // not JSON, or not a valid request
	reasonHelloTimeout             // no hello within HelloTimeout
	reasonProtocol                 // first request not hello, or a second hello
	reasonAuth                     // hello rejected, stale token, revoked credential
	reasonWriteError               // writing to the client failed
	reasonSlowConsumer             // the client did not read for writeTimeout
	reasonServerClosed             // Server.Close
	reasonMaxConns                 // too many connections
	reasonPanic                    // a bug; recovered so the daemon keeps serving
	reasonIdle                     // no request for IdleTimeout, no subscription, no wait
	reasonEnded                    // the credential was revoked, or its run or task ended, between requests
	reasonInboundFull              // a line longer than the read-ahead found no room in GlobalInboundBytes in time
)

var reasonNames = [...]string{
	"unknown", "client-closed", "read-error", "oversize-frame", "malformed-frame", "hello-timeout", "protocol",
	"auth", "write-error", "slow-consumer", "server-closed", "max-conns", "panic", "idle", "credential-ended",
	"inbound-full",
}

func (r closeReason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return fmt.Sprintf("closeReason(%d)", int(r))
}

// identity is what a hello authenticated. A zero identity is an unauthenticated connection.
type identity struct {
	role   string // events.RoleWorker, RoleOrchestrator or RoleAdmin
	runID  string // "" for admin
	taskID string // the worker's task; "" otherwise
	key    string // credential key: taskID or events.OrchestratorKey; "" for admin
	digest string // sha-256 of the secret it authenticated with, re-checked before every request
	// attempt is the worker's task's retries at hello: the connection is that attempt's (commands.Credential.Attempt).
	attempt int
	// since is the position of the state a worker's connection was bound on (bindAt; 0 before):
	// commands.Credential.Since.
	since uint64
}

// conn is one client connection: a reader goroutine that decodes and dispatches requests, a writer goroutine that
// drains the outbound queue, and at most one subscription plus MaxWaitsPerConn waiters, all tracked by the server's
// wait group.
type conn struct {
	s   *Server
	nc  *net.UnixConn
	seq uint64
	out *outbound
	w   *socketWriter // writes the socket: one goroutine at a time (out's claim, or the writer with its batch)
	in  inboundShare  // what its reader's long lines take of the server's inbound budgets

	ctx    context.Context // cancelled when the connection closes: ends Submit waits and subscriptions
	cancel context.CancelFunc
	done   <-chan struct{}

	id         identity             // written by the reader during hello, before bind publishes the connection
	authed     bool                 // reader only
	keys       paceKeys             // credKey(id), runKey(id) once authed: its buckets, built once, not per request
	cred       *commands.Credential // c.id.credential() once bound (Since set): the writer checks it again
	bound      bool                 // counted by bind (under the server's mu)
	pending    bool                 // counted in the server's pending for peerPID until its hello ends (server's mu)
	placed     place                // its place from its hello's authentication on (claimPlace; server's mu)
	peerPID    int                  // the connecting process (SO_PEERCRED)
	subCounted bool                 // counted in the credential's subscriptions (under the server's mu)
	// givenBack: its credential ended, and it counts against no limit any more, though its final frame may not be
	// written yet (giveBackEnded; server's mu).
	givenBack bool
	boundAt   uint64 // the published head at hello: mailbox pushes are of later messages (server's mu)

	// members is the map the reader split its last command's params into, kept empty for the next (runCommand
	// takes it while it fills it, and gives it back emptied only after a command it could parse): reader only, and
	// ParseMembers keeps nothing of it.
	members map[string]json.RawMessage
	// answerBuf is the frame of the reader's last answer to a command, kept for the next (answerCommand): reader only.
	answerBuf []byte

	mu      sync.Mutex
	sub     *subscription
	waits   int
	serving bool        // the reader is serving a request: a final frame decided elsewhere waits for its answer
	ending  *finalError // the connection ends with this frame (terminate)
	idle    *time.Timer // IdleTimeout after the last request; nil before hello or when disabled
	idleAt  time.Time   // when the connection last became idle: its hello, or its last answer
	closed  bool        // close has stopped the idle timer: none is started after it

	closeOnce sync.Once
}

func newConn(s *Server, nc *net.UnixConn, seq uint64) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	return &conn{s: s, nc: nc, seq: seq, out: newOutbound(s.opts.OutboundQueueCap, s.opts.OutboundBytes, &s.outBudget),
		w: newSocketWriter(nc, s.writeTimeout), ctx: ctx, cancel: cancel, done: ctx.Done(),
		in: inboundShare{budgets: [maxBudgets]*inboundBudget{&s.inBudget, &s.helloIn}, done: ctx.Done(), nc: nc,
			wait: s.writeTimeout}}
}

// close ends the connection once: cancels its context, closes the socket (unblocking reader and writer) and
// drops queued frames.
func (c *conn) close(r closeReason) {
	c.closeOnce.Do(func() {
		id := c.s.forget(c) // first: once the peer sees the close, the connection no longer counts against MaxConns
		c.mu.Lock()
		c.closed = true
		if c.idle != nil {
			c.idle.Stop()
		}
		c.mu.Unlock()
		c.cancel()
		c.nc.Close()
		c.out.close()
		c.in.close()
		c.s.lg.Debug("connection closed", "conn", c.seq, "reason", r.String(), "role", id.role, "runId", id.runID,
			"taskId", id.taskID)
	})
}

// recover turns a panic in one of the connection's goroutines into a logged close of that connection only, but for a
// Pebble fatal error (a view a request saves, a read of the log), which it raises again: the store answers nothing
// more, and crewd exits for its supervisor to restart it.
func (c *conn) recover() {
	if r := recover(); r != nil {
		eventlog.RepanicFatal(r)
		c.s.lg.Error("broker: panic serving a connection; closing it", "conn", c.seq, "panic", fmt.Sprint(r),
			"stack", string(debug.Stack()))
		c.close(reasonPanic)
	}
}

func (c *conn) readLoop() {
	defer c.s.wg.Done()
	defer c.recover()
	// The hello deadline is a read deadline: a client that sends half a hello and stalls is cut off too.
	c.in.until = time.Now().Add(c.s.opts.HelloTimeout)
	c.nc.SetReadDeadline(c.in.until)
	rd := wire.NewReader(c.nc, c.s.opts.MaxFrame)
	rd.UseSpillBudget(&c.in)
	for {
		if c.authed && !c.pace(c.keys, nil) {
			return // closing: whoever closed it logged why
		}
		// NB: the next request is read only once the connection is within its outbound bounds: its answer, which never
		// waits (pushResponse), then puts one frame beyond them at most, counted, and none is held outside them.
		if !c.out.awaitRoom(c.done) {
			return // closing: whoever closed it logged why
		}
		// NB: in place: the params are the reader's buffer's until its next read, which is after handle returns; only
		// what keeps them longer copies them (serve).
		req, err := rd.ReadRequestInPlace()
		if err != nil {
			// pi-crew: an invalid request gets no frame (its id cannot be trusted), only the close.
			r := c.readFailure(err)
			// NB: a line cut off by a reset (a client that closed with an answer unread) is truncated as well; one a
			// hello timeout cut off is not: its connection was held for HelloTimeout, its own pace.
			truncated := errors.Is(err, wire.ErrTruncated) && r != reasonHelloTimeout
			// NB: a line refused room, or cut off by its client's close as it waited for room (a read error), was
			// read up to there all the same.
			switch refused := r == reasonMalformed || r == reasonOversize || errors.Is(err, wire.ErrNoRoom) || truncated; {
			case refused && !c.authed:
				// NB: read and parsed up to a frame (a line the stream ended in: read): closed at its process's pace,
				// and charged to it, as a request before a hello is (refuseBeforeHello).
				c.payBeforeHello(rd.FrameBytes())
			case refused:
				// NB: charged as a request of its bytes, before the close: free, a token dialling in a loop had up to
				// a frame read and parsed per connection for its hello's units alone.
				c.charge(requestCost(rd.FrameBytes()))
			case c.authed:
				// NB: the blank lines the stream ended with, read and skipped as a frame's are, cost their bytes as
				// those before a request do: free, a token dialling in a loop had up to a frame of them read per
				// connection for its hello's units alone.
				c.charge(rd.FrameBytes() / frameUnit)
			}
			c.close(r)
			return
		}
		if !c.handle(req, rd.FrameBytes()) {
			return
		}
	}
}

// readFailure classifies why reading stopped.
func (c *conn) readFailure(err error) closeReason {
	switch {
	case errors.Is(err, io.EOF):
		return reasonClientClosed
	case errors.Is(err, wire.ErrFrameTooLarge):
		return reasonOversize
	case errors.Is(err, wire.ErrMalformed):
		return reasonMalformed
	case errors.Is(err, wire.ErrNoRoom) && c.in.clientGone():
		return reasonReadError // NB: its client closed in the middle of a line, as it waited for room
	case errors.Is(err, wire.ErrNoRoom):
		return reasonInboundFull
	case errors.Is(err, os.ErrDeadlineExceeded) && !c.authed:
		return reasonHelloTimeout
	}
	return reasonReadError
}

func (c *conn) writeLoop() {
	defer c.s.wg.Done()
	defer c.recover()
	var buf [][]byte
	for {
		frames, final, reason, ok := c.out.take(buf, c.done)
		if !ok {
			return
		}
		n := 0
		for _, f := range frames {
			n += len(f)
		}
		err := c.w.writeBatch(frames)
		c.out.written(n) // NB: only now: the batch being written counts against the budgets until it is out
		if err != nil {
			c.close(writeFailure(err))
			return
		}
		if final {
			c.close(reason)
			return
		}
		clear(frames)
		buf = frames
	}
}

// writeFailure classifies why a write to the client failed.
func writeFailure(err error) closeReason {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return reasonSlowConsumer
	}
	return reasonWriteError
}

// sendResponse sends a response frame. When the connection has nothing queued and nothing being written, the
// calling goroutine (the reader, or a waiter answering) writes it itself: no hand-off to the writer and back for
// the one frame a request-response client waits for. Otherwise it is queued without waiting, beyond the bounds if it
// does not fit (pushResponse): the reader read the request only once its connection had room (awaitRoom). Either way
// only the connection's own goroutines block on its socket, for writeTimeout at most. false means the connection is
// closing.
func (c *conn) sendResponse(frame []byte) bool {
	return c.sendResponseOf(frame, false)
}

// sendResponseOf is sendResponse of a frame its caller reuses when scratch is set: the frame is copied when it is
// queued, which keeps it until the writer has written it.
func (c *conn) sendResponseOf(frame []byte, scratch bool) bool {
	ok, closing := c.out.claim(frame)
	switch {
	case closing:
		return false
	case !ok:
		if scratch {
			frame = bytes.Clone(frame)
		}
		return c.out.pushResponse(frame)
	}
	err := c.w.write(frame)
	c.out.release(len(frame))
	if err != nil {
		c.close(writeFailure(err))
		return false
	}
	return true
}

// respond queues the answer to request id: result on success, else the mapped error. It reports false when the
// connection is closing (an error with a closing code closes it).
func (c *conn) respond(id, method string, result any, err error) bool {
	if err != nil {
		we, logFull := toWire(err, method)
		if logFull {
			c.s.lg.Error("broker: request failed", "conn", c.seq, "method", method, "err", err)
		}
		return c.refuse(id, method, we)
	}
	raw, merr := resultJSON(result)
	if merr != nil {
		c.s.lg.Error("broker: encode result", "method", method, "err", merr)
		return c.refuse(id, method, wire.NewError(wire.CodeInternal, ""))
	}
	return c.answer(id, method, raw)
}

// resultJSON is a handler's result as the compact, valid JSON its answer carries.
//
// NB: every result is compact, valid JSON already, so it is framed as a CompactResponse, copied rather than
// compacted again (which was most of the cost of framing a small answer): a compactResult is written so, a
// json.RawMessage is the engine's (commands.Reply.Result: json.Marshal's bytes, or its reflection-free encoders'
// held to them, recorded outcomes included), and anything else is json.Marshal's output here.
func resultJSON(result any) (json.RawMessage, error) {
	switch r := result.(type) {
	case compactResult:
		return json.RawMessage(r), nil
	case json.RawMessage:
		return r, nil
	}
	return json.Marshal(result)
}

// answer sends raw, compact and valid JSON, as the result of request id; false means the connection is closing.
func (c *conn) answer(id, method string, raw json.RawMessage) bool {
	return c.answerIn(nil, id, method, raw)
}

// answerCommand is answer from the reader, of a command it served: the frame is made in the reader's buffer
// (answerBuf), reused from one answer to the next, as the answer is mostly written before the reader reads on
// (sendResponse) and copied only when it must wait in the queue.
func (c *conn) answerCommand(id, method string, raw json.RawMessage) bool {
	return c.answerIn(&c.answerBuf, id, method, raw)
}

// maxAnswerBuf is the largest answer's frame the reader keeps its buffer at for the next: a page may take a frame,
// which every connection would otherwise keep for its life.
const maxAnswerBuf = 4 << 10

// answerIn is answer, its frame made in *buf when buf is not nil (and kept there, once written, for the next).
func (c *conn) answerIn(buf *[]byte, id, method string, raw json.RawMessage) bool {
	var dst []byte
	if buf != nil {
		dst = (*buf)[:0]
	}
	frame, we := c.responseFrame(dst, id, method, raw)
	if we != nil {
		return c.refuse(id, method, we)
	}
	c.s.requests.add(method, nil)
	if c.s.answering != nil {
		c.s.answering(c, method)
	}
	ok := c.sendResponseOf(frame, buf != nil)
	if buf != nil && cap(frame) <= maxAnswerBuf {
		*buf = frame[:0]
	}
	return ok
}

// refuse answers request id of method with we, counted (Stats); false means the connection is closing.
func (c *conn) refuse(id, method string, we *wire.Error) bool {
	c.s.requests.add(method, we)
	return c.sendError(id, we)
}

// responseFrame frames raw, compact and valid JSON, as the result of request id of method, appended to dst, or
// returns the error that answers it instead: too-large when the result does not fit in a frame.
func (c *conn) responseFrame(dst []byte, id, method string, raw json.RawMessage) ([]byte, *wire.Error) {
	frame, ferr := wire.AppendCompactResponse(dst, id, raw, c.s.opts.MaxFrame)
	if ferr == nil {
		return frame, nil
	}
	we, _ := toWire(fmt.Errorf("%w: %s", errTooLarge, method), method)
	if !errors.Is(ferr, wire.ErrFrameTooLarge) {
		c.s.lg.Error("broker: encode response", "method", method, "err", ferr)
		we = wire.NewError(wire.CodeInternal, "")
	}
	return nil, we
}

// sendError queues an error frame; a closing code makes it the connection's final frame. A request whose id alone
// leaves no room for an error in a frame (its U+2028 and U+2029 take six bytes each as the answer writes them,
// three as a client may send them) cannot be answered at all: the connection ends with a protocol error of id "".
func (c *conn) sendError(id string, we *wire.Error) bool {
	return c.queueError(id, we, false)
}

// queueError is sendError, the frame the connection's final one whatever its code when final is set (a code that
// does not close ends it with the reason of a refused credential).
func (c *conn) queueError(id string, we *wire.Error, final bool) bool {
	frame := errorFrame(id, we, c.s.opts.MaxFrame)
	if frame == nil {
		we = wire.NewError(wire.CodeProtocol, "request id too long to answer within the frame cap")
		frame = errorFrame("", we, c.s.opts.MaxFrame)
	}
	if final || we.Code.Closes() {
		reason := reasonAuth
		switch we.Code {
		case wire.CodeProtocol:
			reason = reasonProtocol
		case wire.CodeTooManyConnections:
			reason = reasonMaxConns
		}
		c.out.pushFinal(frame, reason)
		return false
	}
	return c.sendResponse(frame)
}

// errorFrame encodes an error frame answering request id ("" for a frame that answers no request), or nil when
// the id alone leaves no room for it (never for id "": the smallest frame holds any error without its message).
func errorFrame(id string, we *wire.Error, maxFrame int) []byte {
	frame, err := wire.AppendFrame(nil, wire.Response{ID: id, Error: we}, maxFrame)
	if err != nil { // only an absurd message or id could do this; never leave the client without an answer
		frame, err = wire.AppendFrame(nil, wire.Response{ID: id, Error: wire.NewError(we.Code, "")}, maxFrame)
	}
	if err != nil {
		return nil
	}
	return frame
}

// finalError is an error that ends the connection, decided outside its reader: a revocation, the end of the
// credential's run or task, the idle timeout.
type finalError struct {
	we     *wire.Error
	reason closeReason
}

// terminate ends the connection after one error frame with id "" (it answers no request). If the reader is
// serving a request, the frame follows that request's answer, so an answer already decided is never replaced;
// otherwise it is queued now. Either way no request is served after it, pushes stop (the queue refuses them),
// and waits and the subscription end when the writer has written it and closed the connection. A connection whose
// credential ended gives back its places at once (giveBackEnded), without waiting for that write.
func (c *conn) terminate(we *wire.Error, reason closeReason) {
	c.mu.Lock()
	if c.ending != nil {
		c.mu.Unlock()
		return
	}
	c.ending = &finalError{we, reason}
	serving := c.serving
	c.mu.Unlock()
	c.out.endPushes() // now, not when the final frame is queued: nothing published from here on reaches the client
	if reason == reasonEnded {
		c.s.giveBackEnded(c)
	}
	if !serving {
		c.out.pushFinal(errorFrame("", we, c.s.opts.MaxFrame), reason)
	}
}

// begin marks the reader as serving a request; false means the connection is ending and the reader must stop.
func (c *conn) begin() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ending != nil {
		return false
	}
	c.serving = true
	return true
}

// end marks the reader idle again and sends a final frame decided while it served; false means it was sent.
func (c *conn) end() bool {
	c.mu.Lock()
	c.serving = false
	e := c.ending
	if e == nil && c.idle != nil {
		// NB: the timer is not stopped and re-armed for every request (two timer-heap updates under its lock per
		// request); it fires as armed, and idleExpired arms it again for what is left of IdleTimeout after idleAt.
		c.idleAt = c.s.idleNow()
	}
	c.mu.Unlock()
	if c.s.requestEnded != nil {
		c.s.requestEnded(c)
	}
	if e != nil {
		c.out.pushFinal(errorFrame("", e.we, c.s.opts.MaxFrame), e.reason)
		return false
	}
	return true
}

// idleFrom starts the connection's idle clock: a hello's, before its answer is queued.
func (c *conn) idleFrom() {
	c.mu.Lock()
	c.idleAt = c.s.idleNow()
	c.mu.Unlock()
}

// startIdleTimer arms the idle timeout after hello (IdleTimeout < 0 disables it), for what is left of it since the
// idle clock started (idleFrom).
func (c *conn) startIdleTimer() {
	if c.s.opts.IdleTimeout < 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		// NB: ended between its bind and here (the feed ends a connection whose credential ended): a timer started
		// now would keep the connection, its buffers and its server reachable until IdleTimeout.
		return
	}
	left := c.s.opts.IdleTimeout - c.s.idleNow().Sub(c.idleAt)
	c.idle = time.AfterFunc(max(left, 0), c.idleExpired)
}

// idleExpired closes an idle connection, unless it holds a subscription or a wait: those are what it waits for,
// and they are bounded per credential.
func (c *conn) idleExpired() {
	select {
	case <-c.done:
		return
	default:
	}
	if c.s.idleFiring != nil {
		c.s.idleFiring(c)
	}
	c.mu.Lock()
	if c.closed {
		// NB: closed since the check above: armed again now, the timer would keep the connection, its buffers and its
		// server reachable for what is left of IdleTimeout (startIdleTimer).
		c.mu.Unlock()
		return
	}
	busy := c.serving || c.waits > 0 || c.sub != nil && !c.sub.ended()
	now := c.s.idleNow()
	left := c.s.opts.IdleTimeout - now.Sub(c.idleAt)
	switch {
	case busy:
		c.idle.Reset(c.s.opts.IdleTimeout)
	case left > 0: // a request came and was answered since the timer was armed
		c.idle.Reset(left)
	}
	c.mu.Unlock()
	if !busy && left <= 0 {
		c.terminate(wire.NewError(wire.CodeIdleTimeout, ""), reasonIdle)
	}
	if c.s.idleChecked != nil {
		c.s.idleChecked(c, now, !busy && left <= 0)
	}
}
