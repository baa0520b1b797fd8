package eventlog

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// errorLogInterval is how often one kind of Pebble error is logged at most. A background error Pebble retries
// (a flush on a full disk) repeats many times a second; the first is logged at once, the next after the interval
// with the count of those left out.
const errorLogInterval = 10 * time.Second

// maxErrorKinds bounds the kinds of errors the limiter remembers; Pebble's format strings are few.
const maxErrorKinds = 256

// pebbleLogger adapts *slog.Logger to Pebble's Logger interface, rate-limiting Errorf per format string.
type pebbleLogger struct {
	l   *slog.Logger
	now func() time.Time
	// log is the log Fatalf fails stop: set once Open has built it (a fatal error before that fails Open's caller).
	log atomic.Pointer[Log]

	mu    sync.Mutex
	kinds map[string]*errorKind
}

type errorKind struct {
	last       time.Time
	suppressed int
}

func newPebbleLogger(l *slog.Logger) *pebbleLogger {
	return &pebbleLogger{l: l, now: time.Now, kinds: make(map[string]*errorKind)}
}

func (p *pebbleLogger) Infof(format string, args ...any) {
	if p.l.Enabled(context.Background(), slog.LevelDebug) {
		p.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
	}
}

func (p *pebbleLogger) Errorf(format string, args ...any) {
	suppressed, ok := p.admit(format)
	if !ok {
		return
	}
	if suppressed > 0 {
		p.l.Error(fmt.Sprintf(format, args...), "component", "pebble", "suppressed", suppressed)
		return
	}
	p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

// admit reports whether an error of this format may be logged now, and how many were left out since the last.
func (p *pebbleLogger) admit(format string) (suppressed int, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	k := p.kinds[format]
	if k == nil {
		if len(p.kinds) >= maxErrorKinds {
			clear(p.kinds)
		}
		p.kinds[format] = &errorKind{last: now}
		return 0, true
	}
	if now.Sub(k.last) < errorLogInterval {
		k.suppressed++
		return 0, false
	}
	suppressed, k.suppressed, k.last = k.suppressed, 0, now
	return suppressed, true
}

// Fatalf must not return (Pebble relies on it). A panic rather than os.Exit lets tests observe it and lets a daemon's
// supervisor restart it; its value is a *FatalError, which nothing may recover and go on (RepanicFatal).
//
// NB: the log fails stop first, reads included: the panic may be recovered all the same (net/http recovers a
// handler's), and the store it leaves answers nothing, an append on it waiting for good where Pebble holds it.
func (p *pebbleLogger) Fatalf(format string, args ...any) {
	f := newFatalError(format, args...)
	p.l.Error(f.Msg, "component", "pebble", "fatal", true)
	if l := p.log.Load(); l != nil {
		l.failFatal(f)
	}
	panic(f)
}
