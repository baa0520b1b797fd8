package broker

import (
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/crewlog/crewlog/broker/wire"
)

// Defaults and bounds of Options (D§2.10 for the pi-crew ones).
const (
	DefaultOutboundQueueCap = 256
	MinOutboundQueueCap     = 32
	MaxOutboundQueueCap     = 4096
	DefaultMaxConns         = 4096
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
	// HelloTimeout is how long a new connection has to send its hello (default 1 s).
	HelloTimeout time.Duration
	// MaxConns bounds open connections; extra ones are accepted and closed at once (default 4096).
	MaxConns int
	// SessionID is echoed in the hello ack's "session".
	SessionID string
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
	if o.MaxConns < 0 {
		add("MaxConns must not be negative")
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
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.ServerKey = append([]byte(nil), o.ServerKey...) // the caller may wipe or reuse its slice
	return o
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
