package httpapi

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/crewlog/crewlog/broker/internal/turns"
	"github.com/crewlog/crewlog/eventlog"
)

// Server is crewlog's read-only HTTP API, live stream, metrics and page, in front of one commands.Engine and its
// eventlog.Log.
//
// Concurrency: every method is safe for concurrent use. Listen once, then Serve once; Close at any time. Handler
// may be served by another http.Server (tests). Errors start with "httpapi: ".
type Server struct {
	opts     Options
	handler  http.Handler
	sessions *secrets
	codes    *secrets
	// proofKey makes each session's proof (sessionProof): random, for the server's life, as its sessions are.
	proofKey [32]byte
	streams  streamLimits
	states   stateCache
	reads    *turns.PerKey   // requests in progress and waiting per credential (readturns.go)
	reading  func(principal) // a test's hook: runs during a read's turn, before its handler
	pacing   func(principal) // a test's hook: runs as a paced read waits for its credential's bucket
	catchUps *turns.PerKey   // streams' reads of the log to catch up, per credential (catchupturns.go)
	// catchingUp is a test's hook: runs in each read of the log a stream's catch-up makes, once it has read the head,
	// with the key of the stream's credential.
	catchingUp func(key string)
	// keepAliveTicks is a test's hook: stands in for the ticker of a stream's keep-alives, asked to tick every
	// Options.KeepAlive (keepAliveTicker).
	keepAliveTicks func(every time.Duration) (ticks <-chan time.Time, stop func())
	// recheck wakes the streams waiting with nothing to send to look at their credentials (recheckbeat.go).
	recheck recheckBeat
	// coalesceClock is a test's hook: stands in for the clock and the timer by which a stream spaces its writes
	// (streamCoalesce): now reads the clock, after waits.
	coalesceClock *coalesceClock
	// searching is a test's hook: runs as a search of the runs (q) starts matching a chunk of them.
	searching func()
	// warmed is a test's hook: runs once runParam has read a cold run back, before the route reads the state.
	warmed func()
	// closing is a test's hook: runs in Close once the listener, the connections and the streams are closed, just
	// before Close waits for the handlers still in progress.
	closing func()
	// closeWaits is a test's hook: runs in a Close that found another in progress, before it waits for that one.
	closeWaits func()
	// writeTimeout is the time a client has to take a piece of an answer or a stream's write (deadlines.go):
	// writeTimeout, or shorter in a test, set before the server serves.
	writeTimeout time.Duration
	// closeGrace is the time Close gives requests in progress before it closes their connections: closeGrace, or
	// shorter in a test.
	closeGrace time.Duration
	// readHeaderTimeout and idleTimeout are the http.Server's (deadlines.go): the consts of those names, or shorter
	// in a test, set before the server listens.
	readHeaderTimeout, idleTimeout time.Duration
	// publicURL is Options.PublicURL as CheckPublicURL returns it ("": none), the base of the login links.
	publicURL string
	// publicHost is the host of publicURL as the Host check (hostAllowed) compares it ("": none): hostForCheck's.
	publicHost string

	mu      sync.Mutex
	ln      *limitListener
	hs      *http.Server
	baseURL string
	// cookieName is the session cookie's name (cookie.go), which names the listener's port once it listens.
	cookieName string
	loopback   bool          // the listener is on a loopback address: check Host
	quit       chan struct{} // closed by Close: ends every stream
	closed     bool
	// closeDone is closed when the first Close has finished: a Close called meanwhile waits for it.
	closeDone chan struct{}
	// handlers counts the requests in progress, entered under mu while the server is open: Close waits for them,
	// since a handler may be reading the log, which its caller closes next.
	handlers sync.WaitGroup
}

// New returns a server for opts. It does not listen: call Listen, then Serve (or serve Handler yourself).
func New(opts Options) (*Server, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	s := &Server{
		opts: o, quit: make(chan struct{}), closeDone: make(chan struct{}), loopback: !o.AllowRemote,
		writeTimeout: writeTimeout, closeGrace: closeGrace, cookieName: cookieNameFor(0, o.SecureCookie),
		readHeaderTimeout: readHeaderTimeout, idleTimeout: idleTimeout,
	}
	rand.Read(s.proofKey[:]) // NB: crypto/rand.Read never fails (Go ≥ 1.24 crashes the process instead)
	// NB: validate checked PublicURL; "" (no public URL) is refused, and so stays "".
	s.publicURL, _ = CheckPublicURL(o.PublicURL, o.SecureCookie)
	if u, err := url.Parse(s.publicURL); err == nil {
		s.publicHost = hostForCheck(u.Hostname())
	}
	s.sessions = newSecrets(o.MaxSessions, maxSessionsPerCredential, s.credentialValid)
	s.codes = newSecrets(maxLoginCodes, maxLoginCodesPerCredential, s.credentialValid)
	s.streams.init(o)
	s.streams.hub.init(s)
	s.streams.hub.start()
	s.states.init(o.Now, s.current, s.quit)
	s.reads = turns.NewWithWaiters(maxReadsPerCredential, maxWaitingReadsPerCredential)
	s.catchUps = turns.New(maxCatchUpsPerCredential)
	if o.Metrics != nil {
		o.Metrics.attach(s)
	}
	s.handler = s.routes()
	return s, nil
}

// Handler is the server's http.Handler.
func (s *Server) Handler() http.Handler { return s.handler }

// CheckAddr reports whether addr is a host:port the server may listen on: a loopback host, or any with
// allowRemote, and a port of 0..65535 or a service's name. An empty host (":7717") means every interface, so it
// needs allowRemote too. NB: the port is checked here, not left to the bind: crewd checks its flags with it before it
// opens the store, so a port that can never be bound is a flag to fix, not a start that fails.
func CheckAddr(addr string, allowRemote bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %w", addr, err)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("%q has no valid port: %w", addr, err)
	}
	if !allowRemote && !loopbackHost(host) {
		return fmt.Errorf("%q is not a loopback address; the dashboard API would be reachable from other machines: "+
			"pass --http-allow-remote to mean it", addr)
	}
	return nil
}

// Listen binds addr (host:port; port 0 picks one). A non-loopback address is refused unless AllowRemote.
func (s *Server) Listen(addr string) error {
	if err := CheckAddr(addr, s.opts.AllowRemote); err != nil {
		return fmt.Errorf("httpapi: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("httpapi: listen: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		ln.Close()
		return errors.New("httpapi: closed")
	}
	s.ln = newLimitListener(ln, s.opts.MaxConns, s.opts.ConnGrace)
	a := ln.Addr().(*net.TCPAddr)
	h := a.IP.String()
	if a.IP.IsUnspecified() {
		h = "127.0.0.1"
	}
	s.reachedAt(h, a.Port)
	s.hs = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: s.readHeaderTimeout,
		IdleTimeout:       s.idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		// NB: no WriteTimeout, which would end every stream: each answer's writes have deadlines of their own
		// (deadlines.go), and so do a stream's.
		ErrorLog: nil,
		// The listener makes room by closing idle and new connections and active ones whose request keeps no place
		// (keepPlace): it needs their states, and their connections to keep.
		ConnState:   s.ln.connState,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) },
	}
	return nil
}

// BaseURL is http://host:port of the listener ("" before Listen).
func (s *Server) BaseURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.baseURL
}

// Serve serves until ctx ends or Close is called; it returns nil on such a stop.
func (s *Server) Serve(ctx context.Context) error {
	s.mu.Lock()
	hs, ln := s.hs, s.ln
	s.mu.Unlock()
	if hs == nil {
		return errors.New("httpapi: Serve before a successful Listen")
	}
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()
	err := hs.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("httpapi: serve: %w", err)
}

// Close ends every stream and stops the listener; requests in progress get 2 s to finish, and their connections are
// closed then. When it returns, no request, stream or part of the server's stream hub reads the log any more. It is
// idempotent and safe to call concurrently: every call returns once the first has finished (crewd's Serve closes
// the server as its context ends while crewd closes it again on its way to closing the log).
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		if s.closeWaits != nil {
			s.closeWaits()
		}
		<-s.closeDone
		return nil
	}
	s.closed = true
	close(s.quit)
	hs := s.hs
	s.mu.Unlock()
	if hs != nil {
		ctx, cancel := context.WithTimeout(context.Background(), s.closeGrace)
		defer cancel()
		if err := hs.Shutdown(ctx); err != nil {
			hs.Close()
		}
	}
	// Streams, the hub and the requests still in progress may be reading the log: once Close returns, the caller may
	// close the log under them. net/http's Close closes the connections of requests that did not finish in time but
	// does not wait for their handlers; their contexts end, and they end with them.
	s.streams.shut()
	<-s.streams.hub.stopped
	if s.closing != nil {
		s.closing()
	}
	s.handlers.Wait()
	close(s.closeDone)
	return nil
}

// closeGrace is the time Close gives the requests in progress to finish.
const closeGrace = 2 * time.Second

// maxHeaderBytes bounds a request's line and headers (net/http reads up to 4 KiB more before it refuses 431, 8 KiB
// more on a connection kept alive: TestARequestsHeadersAreBounded): a client cannot have crewd hold a megabyte
// (net/http's default) of each of its connections' headers.
const maxHeaderBytes = 16 << 10

// enter counts a request in progress, for Close to wait for; false once Close has begun, when the request must not
// start reading the log.
func (s *Server) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.handlers.Add(1)
	return true
}

// closeBegun reports whether Close has begun.
func (s *Server) closeBegun() bool {
	select {
	case <-s.quit:
		return true
	default:
		return false
	}
}

// stopping is the answer to a request that comes, or whose wait ends, once Close has begun.
func stopping() *apiError {
	return errorf(http.StatusServiceUnavailable, codeUnavailable, "crewd is stopping")
}

// loopbackHost reports whether host (no port) names the loopback interface.
func loopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// hostAllowed is the DNS-rebinding check: on a loopback listener the Host header must name loopback too, or the host
// of Options.PublicURL, which a proxy in front may pass on as the browser sent it. NB: a page of another site that
// rebinds its own name to 127.0.0.1 sends that name; the public URL's is the operator's, whose DNS no such page
// controls.
func (s *Server) hostAllowed(r *http.Request) bool {
	if !s.loopback {
		return true
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if loopbackHost(host) {
		return true
	}
	return s.publicHost != "" && strings.EqualFold(hostForCheck(host), s.publicHost)
}

// hostForCheck is host (no port; an IPv6 address bracketed or not) as the Host check compares it with the public
// URL's: without brackets, a trailing dot ("crew.example.com." names the same host) or an IPv6 zone. NB: a zone
// ("%eth0", "%25eth0") names an interface of the machine that sends, so a client or proxy drops it from the Host it
// sends (RFC 6874; net/http's client does): a public URL of fe80::1%25eth0 is reached with the Host [fe80::1]. An
// address, zoned or not, is no name a rebinding page's DNS controls.
func hostForCheck(host string) string {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if ip, _, zoned := strings.Cut(host, "%"); zoned {
		host = ip
	}
	return strings.TrimSuffix(host, ".")
}

// authed is a route that needs a principal.
type authed func(w http.ResponseWriter, r *http.Request, p principal)

// routes is the whole URL space (docs/dashboard-api.md).
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	api := func(pattern string, h authed) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			// NB: on every answer, not only the 401s of authenticate: a read refused later (its token revoked while it
			// waited for its turn) signs the page out as well.
			if base := s.signInBase(); base != "" {
				w.Header().Set(loginHeader, base)
			}
			p, e := s.authenticate(r)
			if e != nil {
				writeError(w, e)
				return
			}
			h(w, r, p)
		})
	}
	get := func(pattern string, h authed) {
		api(pattern, func(w http.ResponseWriter, r *http.Request, p principal) {
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				writeError(w, methodNotAllowed(allowGetHead, "%s %s: the API is read-only; use GET", r.Method, r.URL.Path))
				return
			}
			h(w, r, p)
		})
	}
	// read is a GET route that takes its turn (readturns.go); the stream has limits of its own.
	read := func(pattern string, h authed) { get(pattern, s.takingTurns(h)) }
	read("/api/v1/runs", s.handleRuns)
	read("/api/v1/runs/{runId}", s.handleRun)
	read("/api/v1/runs/{runId}/tasks", s.handleTasks)
	read("/api/v1/runs/{runId}/delegations", s.handleDelegations)
	read("/api/v1/runs/{runId}/ledger", s.handleLedger)
	read("/api/v1/runs/{runId}/mailbox", s.handleMailbox)
	read("/api/v1/runs/{runId}/asks", s.handleAsks)
	read("/api/v1/runs/{runId}/jobs", s.handleJobs)
	read("/api/v1/runs/{runId}/jobs/{jobId}", s.handleJob)
	read("/api/v1/runs/{runId}/credentials", s.handleCredentials)
	read("/api/v1/runs/{runId}/events", s.handleEvents)
	read("/api/v1/runs/{runId}/state", s.handleState)
	read("/api/v1/slots", s.handleSlots)
	read("/api/v1/events/{position}/explain", s.handleExplain)
	// NB: GET only. net/http drops what a handler writes to a HEAD, and the client has its answer with the header:
	// a stream opened for one would go on for nobody, holding its place, with every write taken at once, so
	// neither its write deadline nor its byte budget would end it.
	api(streamPattern, func(w http.ResponseWriter, r *http.Request, p principal) {
		if r.Method != http.MethodGet {
			writeError(w, methodNotAllowed(allowGet, "%s %s: a stream is read with GET", r.Method, r.URL.Path))
			return
		}
		s.handleStream(w, r, p)
	})
	api("/api/v1/login", s.handleNewLogin)
	api("/api/", func(w http.ResponseWriter, r *http.Request, _ principal) {
		writeError(w, notFound("no route %s", r.URL.Path))
	})
	read("/metrics", s.handleMetrics)
	mux.HandleFunc("/healthz", s.handleHealthz)
	mux.HandleFunc("/readyz", s.handleReadyz)
	mux.HandleFunc("/login", s.handleLogin)
	mux.Handle("/", s.uiHandler())
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w := s.withDeadlines(rw)
		if !s.enter() {
			w.Header().Set("Connection", "close")
			writeError(w, stopping())
			return
		}
		defer s.handlers.Done()
		// NB: a request held long starts the watch (clientwatch.go), one with a body at once (unreadbody.go).
		r, stopWatch := watchable(w, r)
		defer stopWatch()
		if r.ContentLength != 0 {
			// No route reads a body: answer, close, and end the request when its client goes.
			watchUnreadBody(w, r)
		}
		if !s.hostAllowed(r) {
			writeError(w, errorf(http.StatusForbidden, codeForbidden, "Host %q is not a loopback name; crewd serves this "+
				"address to local clients only", r.Host))
			return
		}
		if r.URL.Path == "*" || r.Method == http.MethodConnect && !strings.HasPrefix(r.URL.Path, "/") {
			// A target that is not a path ("GET *", CONNECT host:port) names no route; the mux would answer it
			// itself in plain text, outside the API's error shape. (OPTIONS * never gets here: net/http answers it.)
			writeError(w, notFound("no route %s %s", r.Method, r.RequestURI))
			return
		}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				if _, fatal := v.(*eventlog.FatalError); fatal {
					// NB: not raised again here: net/http recovers a handler's panic and serves on. A Pebble fatal
					// error leaves a store that answers nothing more: it is raised on a goroutine of its own, which
					// nothing recovers, and the process exits (status 2) for its supervisor to restart it; this
					// handler answers nothing meanwhile. Its stack, which that panic does not show, is logged.
					s.opts.Logger.Error("httpapi: handler met a Pebble fatal error; the process exits", "path",
						r.URL.Path, "panic", v, "stack", string(debug.Stack()))
					go eventlog.RepanicFatal(v)
					select {}
				}
				s.opts.Logger.Error("httpapi: handler panicked", "path", r.URL.Path, "panic", v)
				writeError(w, errorf(http.StatusInternalServerError, codeInternal, "internal error"))
			}
		}()
		mux.ServeHTTP(w, r)
	})
}
