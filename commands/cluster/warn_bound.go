package cluster

import (
	"log/slog"
	"sync"
	"time"
)

// defaultWarnEvery is how often a node logs one warning about what a peer sent (warnBound): once every 10 s at most
// for each kind, with how many of that kind it left unlogged since.
const defaultWarnEvery = 10 * time.Second

// warnBound bounds the warnings a node logs about what other nodes, or any client of the NATS servers, send it: a
// message on the commands subject that asks for no answer, an answer it cannot send. Each kind (its message) is
// logged at most once every every; the line after a pause says how many of that kind went unlogged (suppressed).
//
// NB: a peer, or a misconfigured client, publishing on the commands subject as fast as it can made crewd write a line
// for each message, flooding its log (and its disk). Kinds are bounded apart, so that a flood of one does not hide
// another; they are the messages of this package's code, a handful.
type warnBound struct {
	every time.Duration
	now   func() time.Time

	mu    sync.Mutex
	kinds map[string]*warnKind
}

// warnKind is what warnBound knows of one kind of warning.
type warnKind struct {
	next       time.Time // when the next line of the kind may be logged
	suppressed uint64    // lines of the kind not logged since the last one
}

func newWarnBound(every time.Duration) *warnBound {
	return &warnBound{every: every, now: time.Now, kinds: make(map[string]*warnKind)}
}

// warn logs msg with args on lg, unless a line of msg was logged less than every ago: then it counts it.
func (b *warnBound) warn(lg *slog.Logger, msg string, args ...any) {
	b.mu.Lock()
	k := b.kinds[msg]
	if k == nil {
		k = &warnKind{}
		b.kinds[msg] = k
	}
	now := b.now()
	if now.Before(k.next) {
		k.suppressed++
		b.mu.Unlock()
		return
	}
	suppressed := k.suppressed
	k.next, k.suppressed = now.Add(b.every), 0
	b.mu.Unlock()
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	lg.Warn(msg, args...)
}
