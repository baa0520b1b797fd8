package broker

import (
	"net"
	"strings"
	"time"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// Per-principal limits. A client that hits one gets an error frame with its own code, never a reset:
//
//	daemon full (MaxConns+AdminConns)            too-many-connections, the connection's only frame, then close
//	another uid's conn over MaxConns              too-many-connections, the connection's only frame, then close
//	a process's hello-less conns (PendingPerPeer) too-many-connections, the connection's only frame, then close
//	non-admin hello over MaxConns                 too-many-connections instead of the hello ack, then close
//	worker hello over MaxConns-ReservedConns      too-many-connections instead of the hello ack, then close
//	worker hello over MaxConnsPerRun              too-many-connections instead of the hello ack, then close
//	hello over MaxConnsPerCredential              too-many-connections instead of the hello ack, then close
//	hello whose pace is too far away              too-many-connections instead of the hello ack, then close
//	task.waitStatus over MaxWaitsPerConn/-Cred    too-many-waits (the connection stays)
//	events.subscribe over MaxSubscriptionsPerCred too-many-subscriptions (the connection stays)
//	page reads over MaxReadsPerCredential         no refusal: the read waits for the credential's turn
//
// The admin credential is bounded by MaxConns+AdminConns and MaxWaitsPerConn only: it is the operator's, and the
// AdminConns places beyond MaxConns are its alone. A run's orchestrator is not counted against MaxConnsPerRun, only
// against MaxConnsPerCredential: however many connections the run's workers hold, they cannot lock the run's
// orchestrator out of its own run. Every connection limit counts a hello as its token is authenticated, before it
// waits for its pace (claimPlace).

// credKey names the credential of id for the per-credential counts; "" for the admin.
func credKey(id identity) string {
	if id.role == events.RoleAdmin {
		return ""
	}
	return id.runID + "\x00" + id.key
}

// runKey names the run whose shared budgets id's connections count against (OutboundBytesPerRun, InboundBytesPerRun,
// RatePerRun): a worker's run; "" for the admin, and for a run's orchestrator, which its workers must not be able to
// lock out of its own run (as MaxConnsPerRun does not count it either).
func runKey(id identity) string {
	if id.role == events.RoleWorker {
		return id.runID
	}
	return ""
}

// keyedBudget is a budget of one credential's connections or one run's workers' (outboundBudget, inboundBudget),
// kept in a map by its key while connections count against it.
type keyedBudget[B any] interface {
	*B
	limitTo(n int64) // sets the limit of a budget just made
	joined() *int    // the connections counting against it, under the server's mu
}

// joinBudget returns the budget of k in m, made with limit when k has none, and counts one more connection against
// it, with s.mu held. A budget is kept while connections count against it (leaveBudget), not for every credential or
// run that ever had one.
func joinBudget[B any, P keyedBudget[B]](m map[string]P, k string, limit int64) P {
	b := m[k]
	if b == nil {
		b = new(B)
		b.limitTo(limit)
		m[k] = b
	}
	*b.joined()++
	return b
}

// leaveBudget counts one connection less against the budget of k in m (none: nothing to do), and drops the budget
// with its last connection, with s.mu held.
func leaveBudget[B any, P keyedBudget[B]](m map[string]P, k string) {
	if b := m[k]; b != nil {
		n := b.joined()
		if *n--; *n <= 0 {
			delete(m, k)
		}
	}
}

func decrement[K comparable](m map[K]int, k K) {
	if m[k]--; m[k] <= 0 {
		delete(m, k)
	}
}

// errConnClosed is the answer of claimPlace, bind and acquireSubscription for a connection closed meanwhile by
// another goroutine: nothing is counted for it, and no frame of it is sent: a hello or an events.subscribe that gets
// it stops serving the connection, whose queue may still be open (close runs forget before it closes the queue).
var errConnClosed = wire.NewError(wire.CodeClose, "connection closed")

// place is what claimPlace counted a connection against: its role's places, its credential's (credKey) and a
// worker's run's (runKey). Zero: nothing.
type place struct{ role, cred, run string }

// claimPlace counts c, whose hello authenticated id, against MaxConns (every connection but the admin's), a
// worker's against MaxConns-ReservedConns and MaxConnsPerRun, and each against MaxConnsPerCredential, or returns
// the refusal; unclaimPlace gives the place back. It is called as the hello is authenticated, before the hello waits
// for its pace: a hello waiting there holds the place it will be bound to, so the hellos of a credential (or a run)
// deep in debt, however many, wait in places of their own, never in the admin's (AdminConns), the orchestrators'
// (ReservedConns), another credential's or another run's, and are refused at once past them.
func (s *Server) claimPlace(c *conn, id identity) *wire.Error {
	if id.role == events.RoleAdmin {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.isOpen(c) {
		// Closed by another goroutine since it was authenticated: forget has run and would not give the place back.
		return errConnClosed
	}
	o := &s.opts
	worker := id.role == events.RoleWorker
	p := place{role: id.role, cred: credKey(id), run: runKey(id)}
	switch {
	case s.places >= o.MaxConns:
		return wire.Errorf(wire.CodeTooManyConnections, "too many connections (%d; the rest are kept for the admin)",
			o.MaxConns)
	case worker && s.workers >= o.MaxConns-o.ReservedConns:
		return wire.Errorf(wire.CodeTooManyConnections, "too many worker connections (%d; the rest are reserved)",
			o.MaxConns-o.ReservedConns)
	case worker && s.runConns[p.run] >= o.MaxConnsPerRun:
		return wire.Errorf(wire.CodeTooManyConnections, "too many worker connections for this run (limit %d)",
			o.MaxConnsPerRun)
	case s.credConns[p.cred] >= o.MaxConnsPerCredential:
		return wire.Errorf(wire.CodeTooManyConnections, "too many connections for this credential (limit %d)",
			o.MaxConnsPerCredential)
	}
	s.places++
	s.credConns[p.cred]++
	if worker {
		s.workers++
		s.runConns[p.run]++
	}
	c.placed = p
	return nil
}

// unclaimPlace gives back the place claimPlace counted c in, if any, with s.mu held.
func (s *Server) unclaimPlace(c *conn) {
	p := c.placed
	if p == (place{}) {
		return
	}
	if p.role == events.RoleWorker {
		s.workers--
		decrement(s.runConns, p.run)
	}
	decrement(s.credConns, p.cred)
	s.places--
	c.placed = place{}
}

// giveBackEnded gives back the places c, a connection whose credential has ended (terminate), holds against the
// limits: its connection's (MaxConns, its run's, its credential's), its waits' and its subscription's, and the bytes
// it holds of its credential's and its run's outbound and inbound budgets. It serves nothing more, but it closes only
// once its final frame is written, behind the answer it may be writing, and a client that reads nothing holds that
// write for up to the write timeout: the places and bytes of a task's re-issued credential (which counts against the
// same key) and of its run were held meanwhile, and the new credential's connections refused. Its bytes count against
// the daemon's budgets alone from then on, within its connection's bounds. Idempotent; a wait or a subscription c
// takes after it is counted against no credential.
func (s *Server) giveBackEnded(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.givenBack {
		return
	}
	c.givenBack = true
	s.unclaimPlace(c)
	k, rk := credKey(c.id), runKey(c.id)
	if k == "" || !c.bound {
		return
	}
	c.out.leave(s.credOut[k])
	c.out.leave(s.runOut[rk])
	c.in.leave(s.credIn[k])
	c.in.leave(s.runIn[rk])
	s.leaveKeyed(c)
	c.mu.Lock()
	waits := c.waits
	c.mu.Unlock()
	for range waits {
		decrement(s.credWaits, k)
	}
}

// leaveKeyed stops counting c, bound, against its credential's and its run's outbound and inbound budgets and its
// credential's subscriptions. The bytes c holds of those budgets are given back by its queue and its reader: as it
// closes (forget), or before (giveBackEnded). With s.mu held.
func (s *Server) leaveKeyed(c *conn) {
	k, rk := credKey(c.id), runKey(c.id)
	leaveBudget(s.credOut, k)
	leaveBudget(s.runOut, rk)
	leaveBudget(s.credIn, k)
	leaveBudget(s.runIn, rk)
	if c.subCounted {
		decrement(s.credSubs, k)
		c.subCounted = false // NB: a subscription ending with a resync after this gives nothing back again
	}
}

// refuse writes the one frame of a connection over MaxConns or MaxPendingPerPeer. The socket is new, so its send
// buffer is empty and the write does not block; the deadline is a guard for the accept loop, which must never wait
// on a client.
func refuse(nc *net.UnixConn, maxFrame int, msg string) {
	nc.SetWriteDeadline(time.Now().Add(10 * time.Millisecond))
	nc.Write(errorFrame("", wire.Errorf(wire.CodeTooManyConnections, "%s", msg), maxFrame))
}

// helloDone stops counting c against its peer's MaxPendingPerPeer (at its hello's end, or its close), with s.mu
// held. It is idempotent.
func (s *Server) helloDone(c *conn) {
	if c.pending {
		c.pending = false
		decrement(s.pending, c.peerPID)
	}
}

// acquireWait counts one task.waitStatus of c against MaxWaitsPerConn and MaxWaitsPerCredential, or returns the
// too-many-waits error.
func (c *conn) acquireWait() error {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	k := credKey(c.id)
	switch {
	case c.waits >= s.opts.MaxWaitsPerConn:
		return wire.Errorf(wire.CodeTooManyWaits,
			"too many task.waitStatus requests in flight on this connection (limit %d)", s.opts.MaxWaitsPerConn)
	case k != "" && s.credWaits[k] >= s.opts.MaxWaitsPerCredential:
		return wire.Errorf(wire.CodeTooManyWaits,
			"too many task.waitStatus requests in flight for this credential (limit %d)", s.opts.MaxWaitsPerCredential)
	}
	c.waits++
	if k != "" && !c.givenBack {
		s.credWaits[k]++
	}
	return nil
}

// releaseWait ends a wait counted by acquireWait.
func (c *conn) releaseWait() {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits--
	if k := credKey(c.id); k != "" && !c.givenBack {
		decrement(s.credWaits, k)
	}
}

// acquireSubscription counts c's subscription sub against MaxSubscriptionsPerCredential, unless c's subscription is
// counted already (a replacement is free: a connection holds one), and makes it c's subscription, returning the
// one it replaces; or it returns the too-many-subscriptions error, or errConnClosed for a connection closed
// meanwhile. NB: one step under the server's mu, so that a subscription ended by a resync meanwhile
// (releaseSubscription) gives back a count its replacement does not hold.
func (c *conn) acquireSubscription(sub *subscription) (old *subscription, err error) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.isOpen(c) {
		// Closed by another goroutine (its writer, on a write error) while the reader served the request: forget has
		// run and would not give the count back, which would hold one of the credential's places for good.
		return nil, errConnClosed
	}
	if k := credKey(c.id); !c.subCounted && !c.givenBack && k != "" {
		if s.credSubs[k] >= s.opts.MaxSubscriptionsPerCredential {
			return nil, wire.Errorf(wire.CodeTooManySubscriptions,
				"too many subscriptions for this credential (limit %d)", s.opts.MaxSubscriptionsPerCredential)
		}
		s.credSubs[k]++
		c.subCounted = true
	}
	c.mu.Lock()
	old, c.sub = c.sub, sub
	c.mu.Unlock()
	return old, nil
}

// releaseSubscription gives back the count of c's subscription sub as it ends with a resync, unless it was replaced
// meanwhile (its replacement holds the count): the connection stays, and would otherwise hold one of its
// credential's MaxSubscriptionsPerCredential places until it closed. A connection's close gives its count back
// itself (forget).
func (c *conn) releaseSubscription(sub *subscription) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	c.mu.Lock()
	current := c.sub == sub
	c.mu.Unlock()
	if current && c.subCounted {
		decrement(s.credSubs, credKey(c.id))
		c.subCounted = false
	}
}

// closeEnded re-checks the credential of every connection of runID (its credentials, status or a task's status
// changed) and ends, after one error frame, those the check refuses: revoked, stale-token for an ended run or
// task. Called by the feed only for events that can end a credential, after they are published. When narrowed,
// the re-check is of the connections of one box only (boxOf: a task's workers, or the orchestrators'): the event
// changed nothing else the check reads. NB: a run's end ends its worker connections even when the run is reopened
// before the feed gets here: the check reads the run's last end against the position each was bound at
// (commands.Credential.Since), not the run's newest status.
func (s *Server) closeEnded(runID string, box string, narrowed bool) {
	s.mu.Lock()
	set := s.byRun[runID]
	if narrowed {
		set = s.byBox[mailboxKey{runID, box}]
	}
	conns := make([]*conn, 0, len(set))
	for c := range set {
		conns = append(conns, c)
	}
	hold := s.onEnding
	s.mu.Unlock()
	if hold != nil {
		hold()
	}
	s.feedRechecks.Add(int64(len(conns)))
	for _, c := range conns {
		if bad := s.recheck(c.id); bad != nil {
			s.lg.Debug("credential ended; closing its connection", "conn", c.seq, "code", string(bad.Code),
				"runId", c.id.runID, "taskId", c.id.taskID)
			c.terminate(bad, reasonEnded)
		}
	}
}

// endsCredentials reports event types after which a connection of the run may no longer pass recheck.
func endsCredentials(eventType string) bool {
	switch eventType {
	case events.TypeCredentialIssued, events.TypeCredentialRevoked,
		events.TypeRunCompleted, events.TypeRunFailed, events.TypeRunCancelled,
		events.TypeTaskCompleted, events.TypeTaskFailed, events.TypeTaskCancelled, events.TypeTaskSkipped,
		events.TypeTaskNeedsAttention, events.TypeTaskRetried,
		events.TypeDelegateCompleted, events.TypeDelegateFailed, events.TypeDelegateTimedOut,
		events.TypeDelegateCancelled:
		return true
	}
	return false
}

// runEnds reports event types that end their run: every worker credential of it ends with them.
func runEnds(eventType string) bool {
	return eventType == events.TypeRunCompleted || eventType == events.TypeRunFailed ||
		eventType == events.TypeRunCancelled
}

// endedBox names the one box (boxOf) whose connections ev, an event that ends credentials, can end, narrowed false
// when it can end any connection of its run (the run's end). A task's end or retry ends only its workers'
// credentials, and a delegation's settlement (every admitted delegation has one) only its shadow task's (projections'
// settle); a credential issued or revoked ends only the connections of its key: a task's workers, or the
// orchestrators'.
// The re-check is one engine read per connection: of the run's every connection it would cost O(connections of the
// run), up to MaxConnsPerRun, per event of a loop an orchestrator controls.
//
// The id is read out of the payload where it is (events.PayloadString), not decoded with the rest of it: every
// settle, task end and credential change passes here. NB: box then aliases ev's payload, which the feed reads
// transiently: it is valid until the feed's next record, and closeEnded keeps nothing of it. A payload it does not
// read so (an older schema version) is decoded with dec, the feed's.
func endedBox(dec *events.Decoder, ev *eventlog.Event) (box string, narrowed bool) {
	if runEnds(ev.Type) {
		return "", false
	}
	if id, ok := events.PayloadString(ev.Type, ev.SchemaVersion, ev.Payload, endedKey(ev.Type)); ok {
		if ev.Type == events.TypeCredentialIssued || ev.Type == events.TypeCredentialRevoked {
			return credentialBox(id), true
		}
		return id, true
	}
	return decodedEndedBox(dec, ev)
}

// endedKey is the payload key of the id whose box an event that ends credentials, not its run's end, names: a
// delegation's subId (its shadow task's box), else the taskId (a task's, or a credential's key).
func endedKey(eventType string) string {
	switch eventType {
	case events.TypeDelegateCompleted, events.TypeDelegateFailed, events.TypeDelegateTimedOut,
		events.TypeDelegateCancelled:
		return "subId"
	}
	return "taskId"
}

// decodedEndedBox is endedBox of ev decoded whole with dec.
func decodedEndedBox(dec *events.Decoder, ev *eventlog.Event) (box string, narrowed bool) {
	decoded, err := projections.FromLogWith(dec, ev)
	if err != nil {
		return "", false
	}
	return endedBoxOf(&decoded)
}

// endedBoxOf is endedBox of ev, an event decoded (or published: the engine's Tap). A payload of another form than
// the pointer to its type's struct the decoder gives names no box: every connection of the run is re-checked, as at
// its end, which ends no more of them than the box would.
func endedBoxOf(ev *events.Event) (box string, narrowed bool) {
	if runEnds(ev.Type) {
		return "", false
	}
	switch p := ev.Payload.(type) {
	case *events.CredentialIssued:
		return credentialBox(p.TaskID), true
	case *events.CredentialRevoked:
		return credentialBox(p.TaskID), true
	case *events.TaskCompleted:
		return p.TaskID, true
	case *events.TaskFailed:
		return p.TaskID, true
	case *events.TaskCancelled:
		return p.TaskID, true
	case *events.TaskSkipped:
		return p.TaskID, true
	case *events.TaskNeedsAttention:
		return p.TaskID, true
	case *events.TaskRetried:
		return p.TaskID, true // a new attempt: the connections of the one before end (commands.Credential.Attempt)
	case *events.DelegateCompleted:
		return p.SubID, true
	case *events.DelegateFailed:
		return p.SubID, true
	case *events.DelegateTimedOut:
		return p.SubID, true
	case *events.DelegateCancelled:
		return p.SubID, true
	}
	return "", false
}

// pageRead reports methods that read and render a page of the log or the state, or up to a frame of one record:
// the requests whose CPU a credential could otherwise multiply by opening connections (events.since, msg.inbox,
// query.*, and proxy.result, which reads a call's result from the log).
func pageRead(method string) bool {
	return method == wire.MethodEventsSince || method == wire.MethodMsgInbox || strings.HasPrefix(method, "query.") ||
		method == methodProxyResult
}

// readTurn waits until the credential of c has fewer than MaxReadsPerCredential page reads in progress and
// returns the function that ends this one; ok is false when the connection closed first. The admin's reads are
// not counted. Fairness, not a refusal: a credential that floods page reads from many connections gets the CPU of
// MaxReadsPerCredential readers, and everyone else keeps theirs. Its reads wait in arrival order, and its turns are
// kept only while it reads (turns.PerKey): not one entry per credential that ever read.
//
// The waiters need no bound of their own (turns.New, not NewWithWaiters): a connection serves its requests one at
// a time and holds at most one subscription, so a credential has at most two reads waiting per connection, and at
// most MaxConnsPerCredential connections. Refusing a read beyond a bound would also need an error code the
// protocol does not have.
func (c *conn) readTurn() (done func(), ok bool) {
	k := credKey(c.id)
	if k == "" {
		return func() {}, true
	}
	done, err := c.s.reads.Take(c.ctx, k)
	return done, err == nil
}

// readPage serves page read cl with h in one of its credential's read turns (readTurn), or returns errConnClosed
// when the connection closed while it waited for one. The turn is given back once the answer is rendered (a result
// that is not JSON yet is made a compactResult), before it is written: a client that does not read its socket
// holds its reader on the answer for up to writeTimeout, and would hold the turn as long, stalling its credential's
// reads on its other connections.
//
// NB: h reads through cl.read, which checks the credential again against what it reads: a client that keeps its
// credential's turns busy can hold this request for as long as it likes.
func (c *conn) readPage(cl *call, h handler) (any, error) {
	done, ok := c.readTurn()
	if !ok {
		return nil, errConnClosed
	}
	defer done() // NB: given back on every path, a panic the server recovers from included
	result, err := h(cl)
	if err != nil {
		return nil, err
	}
	if raw, merr := resultJSON(result); merr == nil {
		return compactResult(raw), nil
	}
	return result, nil // respond meets the same failure again, and answers internal with it logged
}
