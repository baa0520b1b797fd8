package broker

import (
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/crewlog/crewlog/broker/wire"
)

// Defaults and bounds of Options (D§2.10 for the pi-crew ones).
const (
	DefaultOutboundQueueCap = 256
	MinOutboundQueueCap     = 32
	MaxOutboundQueueCap     = 4096
	DefaultMaxConns         = 4096
	// AdminConns is how many connections beyond MaxConns only the admin may hold: another principal's hello is
	// refused once theirs hold MaxConns, so orchestrators of many runs (MaxConnsPerCredential each) that fill the
	// daemon cannot lock out the operator's crewctl during the incident it connects for. A few suffice: crewctl holds
	// one connection per command, crewd's pi-crew follower one. Only a peer of the daemon's own uid, which alone
	// reads the admin token, is let in beyond MaxConns (admit). NB: before its hello a connection of that uid is
	// anyone's, so its connections that never say hello can take these places too, each for HelloTimeout at most
	// and MaxPendingPerPeer of them per process, and so can the hellos of such a process whose earlier hellos were
	// refused, while they wait for its pace (the longer of HelloTimeout and MinHelloPaceWait more at most); a hello
	// waiting for its credential's pace holds the place it claimed instead (claimPlace).
	AdminConns = 8
	// DefaultMaxConnsPerCredential bounds one token's connections: a runtime needs a handful, a loop needs them all.
	DefaultMaxConnsPerCredential = 64
	// DefaultMaxPendingPerPeer bounds one process's connections that have not said hello yet: a runtime that
	// dials all its clients at once (64 in crewbench) stays well below it.
	DefaultMaxPendingPerPeer = 128
	DefaultMaxConnsPerRun    = 1024
	// DefaultIdleTimeout closes a connection that sent no request for that long and holds no subscription or wait.
	DefaultIdleTimeout                   = 30 * time.Minute
	DefaultMaxWaitsPerConn               = 16
	DefaultMaxWaitsPerCredential         = 64
	DefaultMaxSubscriptionsPerCredential = 16
	DefaultMaxReadsPerCredential         = 2
	// DefaultRatePerCredential is the units per second (a request, or an event events.since or a
	// subscription reads) one credential is served: far above what a pi-crew worker or orchestrator asks, far below what
	// a loop can.
	DefaultRatePerCredential = 5000
	// DefaultOutboundBytes is one connection's outbound budget: 16 frames at the default frame cap.
	DefaultOutboundBytes = 4 << 20
	// DefaultGlobalOutboundBytes is the daemon's outbound budget, shared by every connection.
	DefaultGlobalOutboundBytes = 256 << 20
	// DefaultGlobalInboundBytes is the daemon's inbound budget, shared by every connection's reader: 256 lines at the
	// default frame cap longer than the read-ahead at once, a quarter of the outbound budget.
	DefaultGlobalInboundBytes = 64 << 20
	// credentialShares is how many credentials it takes, by default, to hold all of GlobalOutboundBytes (or
	// GlobalInboundBytes): one credential's connections hold at most GlobalOutboundBytes/credentialShares
	// (OutboundBytesPerCredential), its readers GlobalInboundBytes/credentialShares (InboundBytesPerCredential).
	credentialShares = 16
	// runShares is how many runs it takes, by default, to hold all of GlobalOutboundBytes (or GlobalInboundBytes):
	// one run's workers hold at most GlobalOutboundBytes/runShares (OutboundBytesPerRun), their readers
	// GlobalInboundBytes/runShares (InboundBytesPerRun).
	runShares = 4
	// runPaceShares is how many credentials' pace one run's workers get together by default (RatePerRun,
	// BurstPerRun).
	runPaceShares = 4
	// MinServerKeyLen is the shortest ServerKey: HMAC-SHA256 gains nothing from a longer key than its block and
	// loses strength with a shorter one than its output.
	MinServerKeyLen = 32
	// maxSocketPath is sun_path's size minus the terminating NUL on Linux; a longer path cannot be bound.
	maxSocketPath = 107
	maxSessionID  = 256
)

// Options configure a Server. Zero fields mean their default; Validate reports every problem at once.
type Options struct {
	// SocketPath is where the unix socket is bound (required). A new directory is made 0700 and the socket 0600;
	// an existing directory that others may reach is refused (see Listen).
	SocketPath string
	// SocketGroup, when not 0, is the group id whose members may connect: the socket is 0660 and its directory
	// 0750 with that group, and peers of another uid are accepted when they are in it. 0 (root's group, which
	// needs no grant) means only this process's uid may connect.
	SocketGroup int
	// AdminDigest is the lowercase hex sha-256 of the admin token. Empty disables the admin credential.
	AdminDigest string
	// ServerKey (≥ 32 random bytes, kept by the daemon) keys the derivation of every token the broker mints.
	ServerKey []byte
	// MaxFrame is the frame cap in bytes, newline included (default 262144, 1024..1048576).
	MaxFrame int
	// OutboundQueueCap bounds the frames queued for one connection (default 256, 32..4096).
	OutboundQueueCap int
	// HelloTimeout is how long a new connection has to send its hello (default 1 s). Its hello may then wait for its
	// pace (RatePerCredential) for the longer of HelloTimeout and MinHelloPaceWait: one that would wait longer is
	// refused (too-many-connections), at once if its token was read, else when that wait has passed.
	HelloTimeout time.Duration
	// MaxConns bounds the connections of every principal but the admin (default 4096): a hello of another is refused
	// (too-many-connections) once theirs hold MaxConns, and AdminConns places more are the admin's alone. A
	// connection over MaxConns+AdminConns in all, or over MaxConns from a peer of another uid than the daemon's, is
	// answered one too-many-connections error frame and closed.
	MaxConns int
	// ReservedConns of the MaxConns are kept for the admin and orchestrators: a worker's hello is refused
	// (too-many-connections) once worker connections hold MaxConns-ReservedConns (default MaxConns/16; negative:
	// none). A connection's place of either, as of MaxConnsPerCredential and MaxConnsPerRun, is taken as its hello
	// is authenticated, before the hello waits for its credential's pace, so hellos that wait never hold a place
	// kept for others.
	ReservedConns int
	// MaxConnsPerCredential bounds the connections authenticated by one credential (default 64); the admin's are
	// bounded by MaxConns+AdminConns only.
	MaxConnsPerCredential int
	// MaxConnsPerRun bounds the worker connections bound to one run (default 1024); the run's orchestrator is
	// bounded by MaxConnsPerCredential alone, so its workers cannot lock it out.
	MaxConnsPerRun int
	// MaxPendingPerPeer bounds the connections of one peer process (its pid, from SO_PEERCRED) that have not
	// finished their hello (default 128). A connection without a hello holds a place of MaxConns+AdminConns for up
	// to HelloTimeout to send it, then the longer of HelloTimeout and MinHelloPaceWait while it waits for its
	// process's pace, and has no credential to count
	// against, so without this one process could fill the daemon with connections that never say hello. An extra
	// one gets one too-many-connections frame and is closed.
	MaxPendingPerPeer int
	// IdleTimeout closes, after one idle-timeout error frame, an authenticated connection that sent no request
	// for that long and holds no subscription and no wait (default 30 min; negative: never).
	IdleTimeout time.Duration
	// MaxWaitsPerConn bounds the task.waitStatus requests in flight on one connection (default 16), and
	// MaxWaitsPerCredential those of one credential over all its connections (default 64); the admin's are
	// bounded per connection only. Beyond either: too-many-waits.
	MaxWaitsPerConn       int
	MaxWaitsPerCredential int
	// MaxSubscriptionsPerCredential bounds the connections of one credential that hold a subscription (default
	// 16; a connection holds at most one). Beyond it: too-many-subscriptions.
	MaxSubscriptionsPerCredential int
	// MaxReadsPerCredential bounds the page reads (events.since, msg.inbox, query.*, proxy.result) one credential
	// has in progress over all its connections (default 2); more wait their turn. The admin's are not bounded.
	MaxReadsPerCredential int
	// OutboundBytes is one connection's outbound budget in bytes, counting the frames queued and the batch being
	// written (default 4 MiB, at least MaxFrame). GlobalOutboundBytes is the budget of all connections together
	// (default 256 MiB, at least OutboundBytes). A push that does not fit either is refused (a subscription gets
	// its resync frame); a response goes in beyond them, counted, and its connection's next request is read only
	// once the connection is within them again; a connection holding nothing always takes one frame.
	OutboundBytes       int
	GlobalOutboundBytes int64
	// OutboundBytesPerCredential bounds the outbound bytes of all the connections of one credential together
	// (default GlobalOutboundBytes/16, at least OutboundBytes; at most GlobalOutboundBytes): without it,
	// MaxConnsPerCredential connections that read nothing could hold all of GlobalOutboundBytes, and every other
	// client's pushes would be refused. The admin's connections are not counted.
	OutboundBytesPerCredential int64
	// GlobalInboundBytes bounds the bytes all connections' readers hold together in lines longer than their
	// read-ahead (4 KiB), from the moment a line outgrows it until it ends (default 64 MiB, at least MaxFrame): a
	// line within the read-ahead takes none of it. A reader that finds no room reads no more from its socket and
	// waits for room, 10 s at most and before its hello not past the hello's deadline; then its connection closes
	// as for a line over the cap, without a frame, the line charged as one is. Without it, every connection could
	// hold a frame's worth of a line it never ends, indefinitely while it holds a subscription.
	GlobalInboundBytes int64
	// InboundBytesPerCredential bounds the bytes the readers of all the connections of one credential hold together
	// in lines longer than their read-ahead (default GlobalInboundBytes/16, at least MaxFrame; at most
	// GlobalInboundBytes), and InboundBytesPerRun those of all the worker connections of one run, whatever their
	// credentials (default GlobalInboundBytes/4, at least InboundBytesPerCredential; at most GlobalInboundBytes).
	// A reader takes a line's bytes from every budget it counts against, or none, and waits for room in all of them
	// as it does for the daemon's. Without them, the connections of one credential, or the workers of a run that
	// issues a credential to each of its tasks, that leave lines unfinished could hold all of GlobalInboundBytes,
	// and every other client's line longer than the read-ahead would wait, and close, until they ended theirs. A
	// connection counts against them from its hello's answer on: before it, it has no credential, its line ends
	// with the hello's deadline, and every connection before its hello counts together against one
	// InboundBytesPerCredential (a hello is well within the read-ahead). As for the outbound budget, the run's
	// orchestrator is not counted against its run's (its workers cannot take its room) and the admin's connections
	// against neither: the admin's lines count against GlobalInboundBytes alone, where it takes sixteen
	// credentials' shares at the defaults to hold it all.
	InboundBytesPerCredential int64
	InboundBytesPerRun        int64
	// RatePerCredential paces each credential but the admin's to that many units per second (a request is one
	// unit and one more per 4 KiB of its frame, a hello 50; every event events.since reads for it, the one past
	// its page included, or its subscription reads is one more), with bursts of
	// BurstPerCredential units (default: one second's worth). A credential over its rate is not refused: its
	// connections' next requests are read, and its subscriptions pull, only when its budget allows (pacer.go); only a
	// hello that would wait longer than HelloTimeout (MinHelloPaceWait at least) is refused.
	// Default 5000; negative: no pacing.
	RatePerCredential  int
	BurstPerCredential int
	// OutboundBytesPerRun bounds the outbound bytes of all the worker connections of one run together, whatever their
	// credentials (default GlobalOutboundBytes/4, at least OutboundBytesPerCredential; at most GlobalOutboundBytes).
	// A run's orchestrator may issue a credential to every task it creates, so without it a run of
	// GlobalOutboundBytes/OutboundBytesPerCredential credentials (16 by default) that read nothing could hold all of
	// GlobalOutboundBytes. A quarter is four credentials' shares at the defaults: four of a run's workers whose
	// readers lag at once reach their run's bound only as they reach their own, while one run, however many
	// credentials it issues, leaves three quarters to the others, and it takes four runs that all stop reading to
	// hold the whole. The run's orchestrator is not counted, as for MaxConnsPerRun: its workers cannot take its room.
	// The admin's connections are not counted.
	OutboundBytesPerRun int64
	// RatePerRun paces the workers of one run together, whatever their credentials, to that many units per second,
	// with bursts of BurstPerRun units: each of their requests and reads waits for its run's bucket as well as its
	// credential's (pacer.go), so a run that issues a credential to every task it creates is served RatePerRun, not
	// RatePerCredential times its credentials. Default: four times RatePerCredential (none when RatePerCredential
	// is negative), and bursts of four times BurstPerCredential, at least one second's worth: one credential never
	// reaches its run's bound before its own, a run's workers are paced by it only when more than four of them are
	// busy at once, and a run is served at most five credentials' worth with its orchestrator's (not paced by its
	// run, so its workers cannot slow it). Negative: no pacing per run.
	RatePerRun  int
	BurstPerRun int
	// SessionID is echoed in the hello ack's "session".
	SessionID string
	// DashboardLogin mints a one-time login link to the dashboard the daemon serves, for the admin
	// (dashboard.login), and the time it expires; ok is false while it serves none. nil: it serves none.
	DashboardLogin func() (url string, expiresAt time.Time, ok bool)
	// Logger receives connection lifecycle at debug and failures at warn/error (default discard). It never
	// receives a token.
	Logger *slog.Logger
}

// Validate reports every problem with o at once, each error starting with "broker: ".
func (o *Options) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf("broker: "+format, args...)) }
	switch {
	case o.SocketPath == "":
		add("SocketPath is required")
	case len(o.SocketPath) > maxSocketPath:
		add("SocketPath is %d bytes; a unix socket path is at most %d", len(o.SocketPath), maxSocketPath)
	}
	if o.AdminDigest != "" && !validDigest(o.AdminDigest) {
		add("AdminDigest must be 64 lowercase hex chars (sha-256 of the admin token)")
	}
	if len(o.ServerKey) < MinServerKeyLen {
		add("ServerKey must be at least %d bytes, got %d", MinServerKeyLen, len(o.ServerKey))
	}
	if o.MaxFrame != 0 {
		if err := wire.ValidateMaxFrame(o.MaxFrame); err != nil {
			add("MaxFrame: %v", err)
		}
	}
	if n := o.OutboundQueueCap; n != 0 && (n < MinOutboundQueueCap || n > MaxOutboundQueueCap) {
		add("OutboundQueueCap %d is outside %d..%d", n, MinOutboundQueueCap, MaxOutboundQueueCap)
	}
	if o.HelloTimeout < 0 {
		add("HelloTimeout must not be negative")
	}
	if o.SocketGroup < 0 {
		add("SocketGroup must not be negative")
	}
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"MaxConns", int64(o.MaxConns)}, {"MaxConnsPerCredential", int64(o.MaxConnsPerCredential)},
		{"MaxConnsPerRun", int64(o.MaxConnsPerRun)}, {"MaxPendingPerPeer", int64(o.MaxPendingPerPeer)},
		{"MaxWaitsPerConn", int64(o.MaxWaitsPerConn)},
		{"MaxWaitsPerCredential", int64(o.MaxWaitsPerCredential)},
		{"MaxSubscriptionsPerCredential", int64(o.MaxSubscriptionsPerCredential)},
		{"MaxReadsPerCredential", int64(o.MaxReadsPerCredential)},
		{"OutboundBytes", int64(o.OutboundBytes)}, {"GlobalOutboundBytes", o.GlobalOutboundBytes},
		{"OutboundBytesPerCredential", o.OutboundBytesPerCredential}, {"OutboundBytesPerRun", o.OutboundBytesPerRun},
		{"GlobalInboundBytes", o.GlobalInboundBytes},
		{"InboundBytesPerCredential", o.InboundBytesPerCredential}, {"InboundBytesPerRun", o.InboundBytesPerRun},
		{"BurstPerCredential", int64(o.BurstPerCredential)}, {"BurstPerRun", int64(o.BurstPerRun)},
	} {
		if f.v < 0 {
			add("%s must not be negative", f.name)
		}
	}
	if d := o.withDefaults(); o.ReservedConns >= 0 && d.ReservedConns >= d.MaxConns && d.MaxConns > 0 {
		add("ReservedConns %d must be below MaxConns %d", d.ReservedConns, d.MaxConns)
	}
	if d := o.withDefaults(); d.OutboundBytes < d.MaxFrame {
		add("OutboundBytes %d must be at least MaxFrame %d", d.OutboundBytes, d.MaxFrame)
	}
	if d := o.withDefaults(); d.GlobalOutboundBytes < int64(d.OutboundBytes) {
		add("GlobalOutboundBytes %d must be at least OutboundBytes %d", d.GlobalOutboundBytes, d.OutboundBytes)
	}
	if d := o.withDefaults(); d.GlobalInboundBytes < int64(d.MaxFrame) {
		add("GlobalInboundBytes %d must be at least MaxFrame %d", d.GlobalInboundBytes, d.MaxFrame)
	}
	d := o.withDefaults()
	for _, sh := range []struct {
		name, floorName, globalName string
		set, v, floor, global       int64
	}{
		{"OutboundBytesPerCredential", "OutboundBytes", "GlobalOutboundBytes", o.OutboundBytesPerCredential,
			d.OutboundBytesPerCredential, int64(d.OutboundBytes), d.GlobalOutboundBytes},
		{"OutboundBytesPerRun", "OutboundBytesPerCredential", "GlobalOutboundBytes", o.OutboundBytesPerRun,
			d.OutboundBytesPerRun, d.OutboundBytesPerCredential, d.GlobalOutboundBytes},
		{"InboundBytesPerCredential", "MaxFrame", "GlobalInboundBytes", o.InboundBytesPerCredential,
			d.InboundBytesPerCredential, int64(d.MaxFrame), d.GlobalInboundBytes},
		{"InboundBytesPerRun", "InboundBytesPerCredential", "GlobalInboundBytes", o.InboundBytesPerRun,
			d.InboundBytesPerRun, d.InboundBytesPerCredential, d.GlobalInboundBytes},
	} {
		if sh.set > 0 && (sh.v < sh.floor || sh.v > sh.global) {
			add("%s %d must be within %s %d..%s %d", sh.name, sh.v, sh.floorName, sh.floor, sh.globalName, sh.global)
		}
	}
	if wire.UTF16Len(o.SessionID) > maxSessionID {
		add("SessionID must be at most %d chars", maxSessionID)
	}
	return errors.Join(errs...)
}

// withDefaults returns a copy of o with zero fields set to their defaults.
func (o Options) withDefaults() Options {
	if o.MaxFrame == 0 {
		o.MaxFrame = wire.DefaultMaxFrame
	}
	if o.OutboundQueueCap == 0 {
		o.OutboundQueueCap = DefaultOutboundQueueCap
	}
	if o.HelloTimeout == 0 {
		o.HelloTimeout = wire.HelloTimeout
	}
	if o.MaxConns == 0 {
		o.MaxConns = DefaultMaxConns
	}
	switch {
	case o.ReservedConns == 0:
		o.ReservedConns = o.MaxConns / 16
	case o.ReservedConns < 0:
		o.ReservedConns = 0
	}
	o.MaxConnsPerCredential = orDefault(o.MaxConnsPerCredential, DefaultMaxConnsPerCredential)
	o.MaxConnsPerRun = orDefault(o.MaxConnsPerRun, DefaultMaxConnsPerRun)
	o.MaxPendingPerPeer = orDefault(o.MaxPendingPerPeer, DefaultMaxPendingPerPeer)
	o.IdleTimeout = orDefault(o.IdleTimeout, DefaultIdleTimeout)
	o.MaxWaitsPerConn = orDefault(o.MaxWaitsPerConn, DefaultMaxWaitsPerConn)
	o.MaxWaitsPerCredential = orDefault(o.MaxWaitsPerCredential, DefaultMaxWaitsPerCredential)
	o.MaxSubscriptionsPerCredential = orDefault(o.MaxSubscriptionsPerCredential, DefaultMaxSubscriptionsPerCredential)
	o.MaxReadsPerCredential = orDefault(o.MaxReadsPerCredential, DefaultMaxReadsPerCredential)
	o.OutboundBytes = orDefault(o.OutboundBytes, DefaultOutboundBytes)
	o.GlobalOutboundBytes = orDefault(o.GlobalOutboundBytes, DefaultGlobalOutboundBytes)
	o.OutboundBytesPerCredential = orDefault(o.OutboundBytesPerCredential,
		DefaultOutboundBytesPerCredential(o.GlobalOutboundBytes, o.OutboundBytes))
	o.OutboundBytesPerRun = orDefault(o.OutboundBytesPerRun,
		DefaultOutboundBytesPerRun(o.GlobalOutboundBytes, o.OutboundBytesPerCredential))
	o.GlobalInboundBytes = orDefault(o.GlobalInboundBytes, DefaultGlobalInboundBytes)
	o.InboundBytesPerCredential = orDefault(o.InboundBytesPerCredential,
		DefaultInboundBytesPerCredential(o.GlobalInboundBytes, o.MaxFrame))
	o.InboundBytesPerRun = orDefault(o.InboundBytesPerRun,
		DefaultInboundBytesPerRun(o.GlobalInboundBytes, o.InboundBytesPerCredential))
	o.RatePerCredential = orDefault(o.RatePerCredential, DefaultRatePerCredential)
	o.BurstPerCredential = orDefault(o.BurstPerCredential, max(o.RatePerCredential, 1))
	o.RatePerRun = orDefault(o.RatePerRun, DefaultRatePerRun(o.RatePerCredential))
	o.BurstPerRun = orDefault(o.BurstPerRun, DefaultBurstPerRun(o.BurstPerCredential, o.RatePerRun))
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.ServerKey = append([]byte(nil), o.ServerKey...) // the caller may wipe or reuse its slice
	return o
}

// DefaultOutboundBytesPerCredential is OutboundBytesPerCredential's default for a daemon's outbound budget of
// global bytes and a connection's of perConn: a sixteenth of global, at least perConn, at most global.
func DefaultOutboundBytesPerCredential(global int64, perConn int) int64 {
	return shareOf(global, credentialShares, int64(perConn))
}

// DefaultOutboundBytesPerRun is OutboundBytesPerRun's default for a daemon's outbound budget of global bytes and a
// credential's of perCred: a quarter of global, at least perCred, at most global.
func DefaultOutboundBytesPerRun(global, perCred int64) int64 {
	return shareOf(global, runShares, perCred)
}

// DefaultInboundBytesPerCredential is InboundBytesPerCredential's default for a daemon's inbound budget of global
// bytes and a frame cap of maxFrame: a sixteenth of global, at least maxFrame, at most global.
func DefaultInboundBytesPerCredential(global int64, maxFrame int) int64 {
	return shareOf(global, credentialShares, int64(maxFrame))
}

// DefaultInboundBytesPerRun is InboundBytesPerRun's default for a daemon's inbound budget of global bytes and a
// credential's of perCred: a quarter of global, at least perCred, at most global.
func DefaultInboundBytesPerRun(global, perCred int64) int64 {
	return shareOf(global, runShares, perCred)
}

// shareOf is one of shares parts of global, at least floor, at most global.
func shareOf(global int64, shares int, floor int64) int64 {
	return min(max(global/int64(shares), floor), global)
}

// DefaultRatePerRun is RatePerRun's default for a credential's rate of perCred units per second: four times it, or
// perCred itself when it is not positive (no pacing).
func DefaultRatePerRun(perCred int) int {
	if perCred <= 0 {
		return perCred
	}
	return saturatedTimes(perCred, runPaceShares)
}

// DefaultBurstPerRun is BurstPerRun's default for a credential's burst of perCred units and a run's rate of perRun:
// four times perCred, at least perRun (one second's worth), at least 1.
func DefaultBurstPerRun(perCred, perRun int) int {
	return max(saturatedTimes(perCred, runPaceShares), perRun, 1)
}

// saturatedTimes is n×k for k > 0, or math.MaxInt when that overflows.
func saturatedTimes(n, k int) int {
	if n > math.MaxInt/k {
		return math.MaxInt
	}
	return n * k
}

// orDefault is v, or def when v is zero.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// validDigest reports whether d is a lowercase hex sha-256 digest.
func validDigest(d string) bool {
	if len(d) != 64 {
		return false
	}
	_, err := hex.DecodeString(d)
	for i := 0; err == nil && i < len(d); i++ {
		if d[i] >= 'A' && d[i] <= 'F' {
			return false
		}
	}
	return err == nil
}
