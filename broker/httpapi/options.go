package httpapi

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"time"

	"github.com/crewlog/crewlog/broker"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
)

// Defaults and bounds of Options.
const (
	// DefaultAddr is crewd's --http default: loopback only.
	DefaultAddr = "127.0.0.1:7717"
	// DefaultStreamBytes is one stream's outbound budget, as one socket connection's (broker.DefaultOutboundBytes).
	DefaultStreamBytes = broker.DefaultOutboundBytes
	// DefaultMaxStreams bounds open streams; DefaultMaxStreamsPerPrincipal those of one credential or session.
	DefaultMaxStreams             = 512
	DefaultMaxStreamsPerPrincipal = 64
	// DefaultKeepAlive is the interval of the stream's comment lines, which keep proxies from closing it.
	DefaultKeepAlive = 15 * time.Second
	// DefaultMaxConns bounds the HTTP connections open at once (keep-alive ones included).
	DefaultMaxConns = 1024
	// DefaultConnGrace is how long a new connection may take to send its first request before it may be closed
	// to make room (see Options.ConnGrace).
	DefaultConnGrace = time.Second
	// DefaultMaxSessions bounds the login sessions kept; the oldest of the credential that holds the most goes first.
	DefaultMaxSessions = 1024
	// SessionLifetime is how long a session cookie is honoured.
	SessionLifetime = 7 * 24 * time.Hour
	// LoginCodeLifetime is how long a login code is valid: one minted by POST /api/v1/login or dashboard.login,
	// and the one crewd prints at start (LoginURL).
	LoginCodeLifetime = 10 * time.Minute
)

// TokenChecker knows the read-only tokens. Valid reports whether a token with this sha-256 digest (lowercase hex)
// is one, now: a token is refused from the first request after Valid says it is revoked (crewd's checker reads its
// token file again at most once a second). It must be safe for concurrent use and cheap.
type TokenChecker interface {
	Valid(digest string) bool
}

// BrokerStats is the socket server's census, for metrics (implemented by *broker.Server).
type BrokerStats interface {
	Stats() broker.Stats
}

// Pacer paces credentials by the socket's rule (implemented by *broker.Server): HTTPDelay is how long the credential
// with key must wait before its next read is served (0: none), HTTPCharge counts n units of work done for it.
type Pacer interface {
	HTTPDelay(key string) time.Duration
	HTTPCharge(key string, n int)
}

// Options configure a Server. Engine and Log are required; zero fields mean their defaults.
type Options struct {
	// Engine answers every query (Engine.Read) and is the readiness signal; Log is the log it writes, read by
	// events, the stream, state?at and explain.
	Engine *commands.Engine
	Log    *eventlog.Log
	// AdminDigest is the lowercase hex sha-256 of the admin token; empty: no admin bearer.
	AdminDigest string
	// ReadOnly knows the read-only tokens (nil: none).
	ReadOnly TokenChecker
	// UI is the dashboard's files, served at / (nil: a placeholder page). See package webui.
	UI fs.FS
	// AllowRemote lets Listen bind a non-loopback address. Without it Listen refuses one, and the handler refuses
	// a request whose Host is neither a loopback name nor PublicURL's host (DNS rebinding).
	AllowRemote bool
	// SecureCookie marks the session cookie Secure and names it with the __Host- prefix (cookie.go), which browsers
	// hold to Secure, Path=/ and no Domain, and which no page of a plain-http origin may set or replace. Set it only
	// when browsers reach the server over https (a proxy in front terminates TLS): a browser sends a Secure cookie
	// over plain http to localhost at most, so a page of another machine could not sign in. NB: not guessed from
	// X-Forwarded-Proto, which any client may send, nor implied by AllowRemote, which a plain-http setup on a trusted
	// network uses too.
	SecureCookie bool
	// PublicURL is the address browsers reach the server at, through a proxy in front of it: the base of every login
	// link (LoginURL, AdminLoginURL, POST /api/v1/login), such as https://crew.example.com/ (CheckPublicURL: no path
	// but /, no query, fragment nor user name; https with SecureCookie). Empty: the listener's own address (BaseURL).
	// NB: the operator's to say, never guessed from a request's Host or X-Forwarded-* headers (publicurl.go).
	PublicURL string
	// Metrics, when set, is served at /metrics (see NewMetrics). Broker adds the socket's census to it.
	Metrics *Metrics
	Broker  BrokerStats
	// Pacer paces the reads of the read-only tokens (and of the sessions their links opened) by the socket's rule
	// (nil: none; crewd's is its broker). See pacing.go.
	Pacer Pacer
	// StreamBytes is one stream's outbound budget (the hub's ring holds twice that); MaxStreams and
	// MaxStreamsPerPrincipal bound open streams. See the Default constants.
	StreamBytes            int
	MaxStreams             int
	MaxStreamsPerPrincipal int
	KeepAlive              time.Duration
	MaxSessions            int
	// MaxConns bounds the connections Listen's listener holds open at once (default 1024). When they are all open,
	// the listener makes room for the next: it closes the connection idle the longest, else the oldest that has
	// sent no complete request, or whose request in progress holds no read turn nor stream, for longer than
	// ConnGrace (default 1 s); one whose request holds one is never closed (see the package doc). So
	// MaxConns must exceed MaxStreams, since each stream holds one, and the connections one credential can hold
	// with requests in progress: 4 reads in progress, 8 waiting for a turn and its streams
	// (MaxStreamsPerPrincipal, or MaxStreams if fewer; 76 by default).
	MaxConns  int
	ConnGrace time.Duration
	// Now is the clock of sessions and login codes, and times the rebuilds (the Retry-After of too-many-rebuilds)
	// (default time.Now).
	Now func() time.Time
	// Logger gets failures at warn/error (default discard). It never receives a token, code or cookie.
	Logger *slog.Logger
	// NotReady says why the engine's owner stops, or "" while it runs: /readyz answers 503 with it (default: that
	// the engine stopped after a commit error, once Engine.Err says it failed). NB: crewd's words its engine's or,
	// in a cluster, its node's failure from its cause, as the line it logs: a node that lost the writer lease stops
	// with its engine running, and one fenced or diverged committed nothing amiss on its disk.
	NotReady func() string
}

// validate reports every problem at once.
func (o *Options) validate() error {
	var errs []error
	if o.Engine == nil {
		errs = append(errs, errors.New("httpapi: Engine is required"))
	}
	if o.Log == nil {
		errs = append(errs, errors.New("httpapi: Log is required"))
	}
	if o.StreamBytes < 0 || o.MaxStreams < 0 || o.MaxStreamsPerPrincipal < 0 ||
		o.KeepAlive < 0 || o.MaxSessions < 0 || o.MaxConns < 0 || o.ConnGrace < 0 {
		errs = append(errs, errors.New("httpapi: limits must not be negative"))
	}
	if o.PublicURL != "" {
		if _, err := CheckPublicURL(o.PublicURL, o.SecureCookie); err != nil {
			errs = append(errs, fmt.Errorf("httpapi: PublicURL: %w", err))
		}
	}
	d := o.withDefaults()
	if d.MaxConns <= d.MaxStreams {
		errs = append(errs, fmt.Errorf("httpapi: MaxConns %d must exceed MaxStreams %d (each stream holds a connection)",
			d.MaxConns, d.MaxStreams))
	}
	// NB: a connection whose request holds a read turn (or waits for one) or a stream is never closed to make room,
	// so the places one credential can hold that way must leave one for every other credential, the operator's page
	// included.
	if streams, held := d.credentialPlaces(); d.MaxConns <= held {
		errs = append(errs, fmt.Errorf("httpapi: MaxConns %d must exceed the %d connections one credential can hold "+
			"(%d reads in progress + %d waiting + %d streams, MaxStreamsPerPrincipal or MaxStreams if fewer)",
			d.MaxConns, held, maxReadsPerCredential, maxWaitingReadsPerCredential, streams))
	}
	return errors.Join(errs...)
}

// credentialPlaces is what one credential's requests in progress can hold of the listener's places, none of which
// is closed to make room: its streams, and its reads in progress or waiting for a turn (readturns.go).
func (o *Options) credentialPlaces() (streams, held int) {
	streams = min(o.MaxStreams, o.MaxStreamsPerPrincipal)
	return streams, maxReadsPerCredential + maxWaitingReadsPerCredential + streams
}

func (o Options) withDefaults() Options {
	o.StreamBytes = cmp.Or(o.StreamBytes, DefaultStreamBytes)
	o.MaxStreams = cmp.Or(o.MaxStreams, DefaultMaxStreams)
	o.MaxStreamsPerPrincipal = cmp.Or(o.MaxStreamsPerPrincipal, DefaultMaxStreamsPerPrincipal)
	o.KeepAlive = cmp.Or(o.KeepAlive, DefaultKeepAlive)
	o.MaxSessions = cmp.Or(o.MaxSessions, DefaultMaxSessions)
	o.MaxConns = cmp.Or(o.MaxConns, DefaultMaxConns)
	o.ConnGrace = cmp.Or(o.ConnGrace, DefaultConnGrace)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}
