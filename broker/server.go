package broker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/crewlog/crewlog/broker/internal/turns"
	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// writeTimeout bounds one write to a client. A client that reads nothing for this long is a slow consumer and is
// disconnected: its writer goroutine is the only thing it ever blocked.
const writeTimeout = 10 * time.Second

// Server is crewlog's broker: a unix-socket NDJSON server speaking pi-crew's protocol v1 plus crewlog's engine
// methods, in front of one commands.Engine and its eventlog.Log.
//
// Concurrency: every method is safe for concurrent use. Listen once, then Serve once (typically in its own
// goroutine); Close at any time, as often as you like. Errors start with "broker: ".
type Server struct {
	eng  *commands.Engine
	log  *eventlog.Log
	opts Options
	lg   *slog.Logger

	writeTimeout time.Duration // writeTimeout, shortened by tests
	onBound      func()        // nil; tests hold a hello once its bind has been decided, before it is answered
	// onPaced is nil; tests hold a hello once its pace let it in, before its bind, so that its credential ends in
	// between (one that ends while the hello waits for its pace ends the wait: paceHello).
	onPaced func()
	// onRead is nil; tests run it as a request is about to read the published state (call.read), after its run was
	// found and read back, so that the log fails between the two.
	onRead func()
	// onPeer is nil; tests (under mu) change who an accepted connection's peer is once it was let in (another uid,
	// another process).
	onPeer func(peer) peer
	// onPull is nil; tests run it as a subscription's pull has read the published position, before it reads the
	// log, so that the log holds an event past that position.
	onPull func()
	// onEnding is nil; tests hold the feed (set and read under mu) as it is about to re-check the connections an
	// event may end (closeEnded), so that a wait or a subscription runs ahead of it.
	onEnding func()
	// feedStarting is nil; tests hold the feed (set before Serve) as its goroutine starts, before it follows the log.
	feedStarting func()
	// answering is nil; tests hold a connection's reader as it is about to send the answer to a request of method,
	// as a client that does not read its socket holds it (up to writeTimeout).
	answering func(c *conn, method string)
	// feedRechecks counts the connections the feed re-checked for an event that can end credentials (closeEnded):
	// tests learn how far an event's re-check reached.
	feedRechecks atomic.Int64
	// feedLogReads counts the feed's reads of the log: what the engine's tap did not hold (feed.go). tapBound is
	// the bound of the feed's tap (0: feedTapBound; negative: none, so the feed reads every event from the log),
	// set before the server serves: tests make it drop.
	feedLogReads atomic.Int64
	tapBound     int
	// idleNow is the clock IdleTimeout is measured by: time.Now, or a test's that moves only when told, set before
	// the first connection (the idle timers only pace the checks). idleChecked is nil; tests learn what a
	// connection's idle timer decided, at which reading of idleNow. requestEnded is nil; tests learn that a
	// connection's reader has ended a request, its idle clock restarted (idleAt) before it is called.
	idleNow      func() time.Time
	idleChecked  func(c *conn, at time.Time, ended bool)
	requestEnded func(c *conn)
	// idleFiring is nil; tests run it as a connection's idle timer has fired and found the connection open, before
	// it takes the connection's lock, so that the connection closes in between.
	idleFiring func(c *conn)

	mu       sync.Mutex
	ln       *net.UnixListener
	lnInfo   os.FileInfo // the socket file we created, so Close unlinks only ours
	serving  bool
	closing  bool
	conns    map[*conn]struct{}
	byRun    map[string]map[*conn]struct{}     // authenticated run-bound connections, by run
	byBox    map[mailboxKey]map[*conn]struct{} // the same by whose mailbox they read: a push or re-check finds its own
	nextConn uint64
	// Per-principal counts (limits.go), keyed by credential (credKey); the admin is not counted.
	credConns map[string]int             // places (claimPlace): connections authenticated, waiting or bound
	credWaits map[string]int             // task.waitStatus requests in flight
	credSubs  map[string]int             // connections holding a subscription
	reads     *turns.PerKey              // page reads in progress, MaxReadsPerCredential at most
	credOut   map[string]*outboundBudget // outbound bytes of the credential's connections (OutboundBytesPerCredential)
	runOut    map[string]*outboundBudget // outbound bytes of the run's workers' connections (OutboundBytesPerRun)
	credIn    map[string]*inboundBudget  // long lines' bytes of the credential's readers (InboundBytesPerCredential)
	runIn     map[string]*inboundBudget  // long lines' bytes of the run's workers' readers (InboundBytesPerRun)
	// Places (claimPlace): connections whose hello authenticated, waiting for their pace or bound, but the admin's.
	places   int            // at most MaxConns
	workers  int            // those of workers, at most MaxConns-ReservedConns
	runConns map[string]int // those of a run's workers, by run, at most MaxConnsPerRun
	pending  map[int]int    // peer pid → its connections that have not finished hello (MaxPendingPerPeer)
	pacer    *pacer         // per-credential and per-run request and replay rate (pacer.go)
	resyncs  atomic.Uint64  // resync frames sent (Stats)
	requests *requestCounts // the requests answered, by method and answer (Stats)

	waits     waitHub        // task.waitStatus waiters, woken per task
	outBudget outboundBudget // bytes held by every connection's outbound queue
	inBudget  inboundBudget  // bytes held by every connection's reader in lines longer than its read-ahead
	// helloIn counts those of them held by the readers of connections before their hello, which have no credential
	// whose share would bound them, against one credential's share (InboundBytesPerCredential): without it, a
	// client of a few processes (MaxPendingPerPeer connections each) that never said hello, dialling again as each
	// was closed at its hello's deadline, held all of GlobalInboundBytes. A hello is well within the read-ahead.
	helloIn inboundBudget

	importSince      int         // checkpoints the feed saw since it last refreshed their view (feed only)
	importViewSaving atomic.Bool // a save of that view is under way (import_view.go)

	// life is cancelled when Close starts; quit is its Done channel, for the loops that select on it, and life
	// itself goes to the background work that takes a context (import_view.go).
	life      context.Context
	endLife   context.CancelFunc
	quit      <-chan struct{}
	serveDone chan struct{} // closed when Serve's accept loop has returned
	closed    chan struct{} // closed when Close has finished
	closeOnce sync.Once
	wg        sync.WaitGroup // every goroutine but Serve's own
}

// New returns a server for eng and log (the log the engine writes; subscriptions and events.since read it). It
// does not touch the file system: call Listen, then Serve.
func New(eng *commands.Engine, log *eventlog.Log, opts Options) (*Server, error) {
	var errs []error
	if eng == nil {
		errs = append(errs, errors.New("broker: engine is required"))
	}
	if log == nil {
		errs = append(errs, errors.New("broker: event log is required"))
	}
	if err := opts.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	s := &Server{
		eng: eng, log: log, opts: o, lg: o.Logger, writeTimeout: writeTimeout, idleNow: time.Now,
		requests: newRequestCounts(), conns: make(map[*conn]struct{}), byRun: make(map[string]map[*conn]struct{}),
		byBox: make(map[mailboxKey]map[*conn]struct{}), credConns: make(map[string]int),
		credWaits: make(map[string]int), credSubs: make(map[string]int), pending: make(map[int]int),
		reads: turns.New(o.MaxReadsPerCredential), credOut: make(map[string]*outboundBudget),
		runOut: make(map[string]*outboundBudget), credIn: make(map[string]*inboundBudget),
		runIn: make(map[string]*inboundBudget), runConns: make(map[string]int),
		pacer:     newPacer(o.RatePerCredential, o.BurstPerCredential, o.RatePerRun, o.BurstPerRun),
		serveDone: make(chan struct{}), closed: make(chan struct{}),
	}
	s.life, s.endLife = context.WithCancel(context.Background())
	s.quit = s.life.Done()
	s.waits = waitHub{s: s, byRun: make(map[string]*runWaits)}
	s.outBudget.limit = o.GlobalOutboundBytes
	s.inBudget.limit = o.GlobalInboundBytes
	s.helloIn.limit = o.InboundBytesPerCredential
	return s, nil
}

// Addr is the socket path.
func (s *Server) Addr() string { return s.opts.SocketPath }

// Serve accepts connections until ctx ends or Close is called, and returns nil on such a clean stop (after the
// server has fully closed when ctx ended). It returns an error if Listen has not succeeded, if Serve was already
// called, or if accepting fails for good.
func (s *Server) Serve(ctx context.Context) error {
	s.mu.Lock()
	switch {
	case s.closing:
		s.mu.Unlock()
		return nil
	case s.ln == nil:
		s.mu.Unlock()
		return errors.New("broker: Serve before a successful Listen")
	case s.serving:
		s.mu.Unlock()
		return errors.New("broker: Serve called twice")
	}
	s.serving = true
	ln := s.ln
	s.mu.Unlock()

	stop := make(chan struct{})
	byCtx := make(chan struct{})
	go func() { // not in wg: Close waits for the accept loop, and this goroutine may be the one calling Close
		select {
		case <-ctx.Done():
			close(byCtx)
			s.Close()
		case <-stop:
		}
	}()
	s.wg.Add(1)
	// NB: the head is read here, before the first connection is accepted, not by the feed's goroutine when it first
	// runs: what connections accepted meanwhile publish (a revocation of one of them, mail to it) is the feed's too.
	// The tap is taken before it, so that it holds every event published after that head, but those it drops (the
	// feed reads them from the log).
	tap := s.eng.Tap(cmp.Or(s.tapBound, feedTapBound))
	go s.feed(s.eng.Head()+1, tap) // mailbox.message pushes
	err := s.acceptLoop(ln)
	close(s.serveDone)
	close(stop)
	select {
	case <-byCtx:
		<-s.closed
	default:
	}
	return err
}

func (s *Server) acceptLoop(ln *net.UnixListener) error {
	var backoff time.Duration
	for {
		nc, err := ln.AcceptUnix()
		if err != nil {
			select {
			case <-s.quit:
				return nil
			default:
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) || isTemporary(err) {
				// EMFILE and friends: back off as net/http does instead of spinning; not a synchronisation.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.lg.Warn("broker: accept failed; retrying", "err", err, "backoff", backoff)
				select {
				case <-time.After(backoff):
				case <-s.quit:
					return nil
				}
				continue
			}
			return fmt.Errorf("broker: accept: %w", err)
		}
		backoff = 0
		s.admit(nc)
	}
}

// isTemporary reports accept errors that pass (descriptor exhaustion, aborted handshakes).
func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// admit registers a new connection and starts its goroutines, or closes it when the server is closing, or is full
// (after one too-many-connections error frame: the client learns why instead of seeing a reset).
func (s *Server) admit(nc *net.UnixConn) {
	p, err := s.checkPeer(nc)
	if err != nil {
		nc.Close()
		s.lg.Warn("connection refused", "reason", "peer-credentials", "err", err)
		return
	}
	s.mu.Lock()
	if s.onPeer != nil {
		p = s.onPeer(p)
	}
	capacity := s.opts.MaxConns
	if p.UID == os.Geteuid() {
		// NB: the admin's places are counted here: a connection of crewd's uid is anyone's until its hello
		// (claimPlace). One of another uid is not the admin's: the admin token is crewd's uid's alone (0600), so
		// the workers of a dedicated daemon user (docs/security.md), however many processes they dial from, cannot
		// hold the admin's places with connections that never say hello and lock the operator out.
		capacity += AdminConns
	}
	if s.closing || len(s.conns) >= capacity || s.pending[p.PID] >= s.opts.MaxPendingPerPeer {
		full, perPeer := !s.closing, len(s.conns) < capacity
		s.mu.Unlock()
		switch {
		case full && perPeer:
			refuse(nc, s.opts.MaxFrame, "too many connections awaiting hello from this process")
			s.lg.Debug("connection closed", "reason", reasonMaxConns, "pid", p.PID)
		case full:
			refuse(nc, s.opts.MaxFrame, "too many connections")
			s.lg.Debug("connection closed", "reason", reasonMaxConns)
		}
		nc.Close()
		return
	}
	s.nextConn++
	c := newConn(s, nc, s.nextConn)
	c.peerPID, c.pending = p.PID, true
	s.pending[p.PID]++
	s.conns[c] = struct{}{}
	s.wg.Add(2)
	s.mu.Unlock()
	go c.readLoop()
	go c.writeLoop()
}

// bind indexes an authenticated connection by run, for mailbox pushes, once its credential is still valid (its
// place, counted against the connection limits, was claimed before its pacing: claimPlace); otherwise it returns
// the answer to send instead of the hello ack.
//
// NB: the credential is checked and the connection bound under the published state's read lock, which a publish
// waits for (lock order: the engine's, then s.mu, never the reverse). The credential may have ended since
// authenticate read it (the pacing wait in between lasts up to helloPaceWait), and the feed re-checks a run's
// connections for an end only once: an end published before the bind is refused here, one published after it finds
// the connection bound and the feed ends it before any later push. Checked after the bind, a push of mail sent
// after an earlier end could be queued for the connection in between.
//
// ack, the hello's answer, is queued before the connection is published to the feed (under s.mu, which the feed
// takes to find a push's connections): a push is never written before it, and a client reading the answer as the
// connection's first frame is not handed a mailbox message instead.
func (s *Server) bind(c *conn, id identity, ack []byte) (bad *wire.Error) {
	s.eng.Read(func(st *projections.State) {
		if bad = checkCredential(st, id); bad == nil {
			bad = s.bindAt(c, id, st.Position, ack)
		}
	})
	return bad
}

// bindAt is bind's indexing, the published state being at position head.
func (s *Server) bindAt(c *conn, id identity, head uint64, ack []byte) *wire.Error {
	// NB: c.id is written under s.mu because Close (another goroutine) reads
	// it in forget while the reader may be binding.
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.isOpen(c) {
		// Closed by another goroutine (Close, say) since its place was claimed: forget has run, and would not run
		// again for the budgets and indexes a bind would add.
		return errConnClosed
	}
	if !c.out.pushResponse(ack) { // closing: forget is to run, and finds nothing of the bind to undo
		return errConnClosed
	}
	s.helloDone(c)
	if id.role == events.RoleWorker {
		id.since = head // NB: the state the bind checked the credential on
	}
	c.id, c.bound, c.boundAt = id, true, head
	// NB: the reader is between two lines (this is its hello's answer): it holds nothing to count against them.
	c.in.leave(&s.helloIn)
	if k := credKey(id); k != "" {
		c.out.share(joinBudget(s.credOut, k, s.opts.OutboundBytesPerCredential))
		c.in.share(joinBudget(s.credIn, k, s.opts.InboundBytesPerCredential))
	}
	if rk := runKey(id); rk != "" {
		c.out.share(joinBudget(s.runOut, rk, s.opts.OutboundBytesPerRun))
		c.in.share(joinBudget(s.runIn, rk, s.opts.InboundBytesPerRun))
	}
	if id.runID == "" {
		return nil
	}
	addConn(s.byRun, id.runID, c)
	addConn(s.byBox, boxOf(id), c)
	return nil
}

// mailboxKey names whose mailbox a run-bound connection reads: a worker's task's, or the orchestrators' run inbox
// (events.RunInbox, "": no task has that id).
type mailboxKey struct {
	runID, taskID string
}

// boxOf is the mailbox an authenticated run-bound identity reads: its credential's box.
func boxOf(id identity) mailboxKey { return mailboxKey{id.runID, credentialBox(id.key)} }

// credentialBox is the box of the connections authenticated by a credential of key: the orchestrators' for the
// orchestrator key, else the workers' of the task it names.
func credentialBox(key string) string {
	if key == events.OrchestratorKey {
		return events.RunInbox
	}
	return key
}

// addConn adds c to the set of connections under k.
func addConn[K comparable](index map[K]map[*conn]struct{}, k K, c *conn) {
	set := index[k]
	if set == nil {
		set = make(map[*conn]struct{})
		index[k] = set
	}
	set[c] = struct{}{}
}

// removeConn removes c from the set under k, and the set once empty.
func removeConn[K comparable](index map[K]map[*conn]struct{}, k K, c *conn) {
	if set := index[k]; set != nil {
		delete(set, c)
		if len(set) == 0 {
			delete(index, k)
		}
	}
}

// isOpen reports whether c is still one of the server's connections: another goroutine (its writer, Close) may
// have closed it, and then forget has run and will not give back what a later claim would add. With s.mu held.
func (s *Server) isOpen(c *conn) bool {
	_, open := s.conns[c]
	return open
}

// forget removes a closed connection from every index and count and returns the identity it was bound to.
func (s *Server) forget(c *conn) identity {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
	s.helloDone(c)
	if c.bound && !c.givenBack {
		// NB: the connection's bytes are released from these budgets when close drops its queue and its reader's
		// share, right after; a connection whose credential ended left them already (giveBackEnded).
		s.leaveKeyed(c)
	}
	s.unclaimPlace(c)
	if c.bound && c.id.runID != "" {
		removeConn(s.byRun, c.id.runID, c)
		removeConn(s.byBox, boxOf(c.id), c)
	}
	return c.id
}

// Close stops accepting, closes every connection, waits for every goroutine the server started and unlinks the
// socket. It is idempotent and safe to call concurrently; every call returns after the first has finished.
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closing = true
		s.endLife()
		ln, serving := s.ln, s.serving
		conns := make([]*conn, 0, len(s.conns))
		for c := range s.conns {
			conns = append(conns, c)
		}
		s.mu.Unlock()
		if ln != nil {
			ln.Close() // unblocks Accept; NB: SetUnlinkOnClose(false) was set, we unlink below only our own file
		}
		if serving {
			<-s.serveDone
		}
		for _, c := range conns {
			c.close(reasonServerClosed)
		}
		s.wg.Wait()
		if ln != nil {
			err = s.unlink()
		}
		close(s.closed)
	})
	<-s.closed
	return err
}

// unlink removes the socket file if it is still the one Listen created (another server may have replaced it). It
// holds the directory's lock as Listen does (lockDir), so that a broker starting there meanwhile does not replace
// the file between the check and the removal.
func (s *Server) unlink() error {
	unlock, err := lockDir(filepath.Dir(s.opts.SocketPath), dirLockWait)
	if err != nil {
		return err // NB: the file stays; the next broker to start there finds it dead and unlinks it
	}
	defer unlock()
	fi, err := os.Lstat(s.opts.SocketPath)
	if err != nil || !os.SameFile(fi, s.lnInfo) {
		return nil
	}
	// NB: the same device and inode may be another broker's socket, bound since ours was found dead and unlinked:
	// a file system reuses a freed inode's number. Ours no longer listens, so only a socket whose connect is refused
	// may be it; one that answers (or cannot tell) is left alone.
	c, err := probeSocket(s.opts.SocketPath)
	if err == nil {
		c.Close()
		return nil
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return nil
	}
	if err := os.Remove(s.opts.SocketPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("broker: unlink socket: %w", err)
	}
	return nil
}
