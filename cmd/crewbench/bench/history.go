package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crewlog/crewlog/cmd/crewd/daemon"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// HistoryOptions say what history to write: Events events over Runs runs, of
// which the last Active stay running, into a crewd data directory.
type HistoryOptions struct {
	Events int64
	Runs   int
	Active int
	// Dir is a crewd data directory (--data); the store is written to
	// Dir/store, which must not exist yet.
	Dir string
	// Submitters is how many goroutines submit commands at once (default
	// 64): each works through runs one at a time, so the engine's groups
	// hold up to this many commands.
	Submitters int
	// Span is how far back the history begins (default a week): the
	// engine's clock runs from then to now as the events are written, so
	// the runs end at times spread over it, as in a daemon that has served
	// a team that long, and not all within the minutes it takes to write.
	Span time.Duration
	// Progress, when set, gets a line every few seconds.
	Progress io.Writer
}

// HistoryStats is what WriteHistory wrote.
type HistoryStats struct {
	Head     uint64 // events in the store
	Runs     int
	Active   int
	Commands uint64
	Groups   uint64
	Elapsed  time.Duration
}

// Errors of WriteHistory's options.
var (
	errHistoryShape  = errors.New("bench: history needs runs ≥ 1 and 0 ≤ active ≤ runs")
	errHistoryEvents = errors.New("bench: too few events for that many runs")
	errStoreExists   = errors.New("bench: the data directory already holds a store")
)

// historyConfig is the engine config the history is decided under, and the
// one crewd must run with so that it records no engine.configured of its own
// (historyDaemonFlags): every submitter may hold a delegation, so no request
// is refused for slots, and no run quota or message rate binds a run written
// this fast.
func historyConfig() projections.Config {
	cfg := projections.DefaultConfig()
	cfg.MaxSlots = commands.MaxMaxSlots
	cfg.SlotShare = 0
	cfg.QuotaEvents, cfg.QuotaBytes, cfg.QuotaMsgsPerMin = 0, 0, 0
	return cfg
}

// historyDaemonFlags are crewd's flags for historyConfig.
var historyDaemonFlags = []string{"--nesting", "--max-depth=4", "--wait-methods",
	"--max-slots", fmt.Sprint(commands.MaxMaxSlots), "--slot-share", "0",
	"--quota-events", "0", "--quota-bytes", "0", "--quota-msg-rate", "0"}

// WriteHistory writes o.Events events (give or take one command's) through
// commands.Engine, as crewd's engine would have decided them: o.Runs runs,
// each created with its tasks and credentials, worked through delegations
// (admitted, spawned and settled with a result message, some charged, some
// refused), asks, usage reports and mailbox traffic, then completed — except
// the last o.Active, which are left running with a delegation in flight.
// Each run gets an equal share of the events; what the shares leave over is
// written into the active runs at the end.
func WriteHistory(ctx context.Context, o HistoryOptions) (HistoryStats, error) {
	if o.Runs < 1 || o.Active < 0 || o.Active > o.Runs {
		return HistoryStats{}, errHistoryShape
	}
	if o.Submitters <= 0 {
		o.Submitters = 64
	}
	if o.Span <= 0 {
		o.Span = 7 * 24 * time.Hour
	}
	share := (o.Events - 1) / int64(o.Runs) // engine.configured is the one event outside every run
	if share < minRunEvents {
		return HistoryStats{}, fmt.Errorf("%w: %d runs need at least %d events", errHistoryEvents, o.Runs, int64(o.Runs)*minRunEvents+1)
	}
	storeDir := filepath.Join(o.Dir, daemon.StoreDir)
	if _, err := os.Stat(storeDir); err == nil {
		return HistoryStats{}, fmt.Errorf("%w: %s", errStoreExists, storeDir)
	}
	// NB: crewd refuses a data directory or store others may reach.
	if err := os.MkdirAll(storeDir, 0o700); err != nil {
		return HistoryStats{}, err
	}
	l, err := eventlog.Open(storeDir, nil)
	if err != nil {
		return HistoryStats{}, err
	}
	cfg := historyConfig()
	g := &historyWriter{share: share, span: o.Span, target: uint64(o.Events)}
	e, err := commands.Open(l, commands.Options{Config: &cfg, ExpiryInterval: -1, Clock: g.clock})
	if err != nil {
		return HistoryStats{}, errors.Join(err, l.Close())
	}
	g.eng = e
	start := time.Now()
	stopProgress := g.report(o.Progress, o.Events)
	err = g.write(ctx, o)
	stopProgress()
	st := e.Stats()
	stats := HistoryStats{Head: e.Head(), Runs: o.Runs, Active: o.Active, Commands: st.Commands, Groups: st.Groups,
		Elapsed: time.Since(start)}
	return stats, errors.Join(err, e.Close(), l.Close())
}

// historyWriter submits the commands of every run's life to one engine.
type historyWriter struct {
	eng    *commands.Engine
	share  int64 // events each run is given
	ids    atomic.Uint64
	span   time.Duration
	target uint64        // events to write
	head   atomic.Uint64 // the highest position a reply named
}

// clock is the engine's: span before now at the first event, now at the
// last, in proportion to the events written. It never goes back: the head
// only grows, and so does time.Now.
func (g *historyWriter) clock() time.Time {
	left := 1 - float64(min(g.head.Load(), g.target))/float64(g.target)
	return time.Now().Add(-time.Duration(left * float64(g.span)))
}

// write plays every run's life on o.Submitters goroutines, then tops the
// store up to o.Events in the active runs.
func (g *historyWriter) write(ctx context.Context, o HistoryOptions) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	runs := make(chan int)
	lives := make([]*runLife, o.Runs)
	var wg sync.WaitGroup
	for range o.Submitters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range runs {
				l := newRunLife(g, k, k >= o.Runs-max(o.Active, 1))
				if err := l.live(ctx); err != nil {
					cancel(err)
					return
				}
				lives[k] = l
			}
		}()
	}
feed:
	for k := range o.Runs {
		select {
		case runs <- k:
		case <-ctx.Done():
			break feed
		}
	}
	close(runs)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	// With no run left active, the last run stays open for the top-up and
	// is completed after it.
	open := lives[o.Runs-max(o.Active, 1):]
	if o.Active == 0 {
		if err := g.topUp(ctx, open, uint64(o.Events)-closeEvents); err != nil {
			return err
		}
		return open[0].complete(ctx)
	}
	// NB: the delegations left in flight come last, so that they are young
	// when crewd starts: its clock times out one older than its timeout.
	if err := g.topUp(ctx, open, uint64(o.Events)-uint64(o.Active*inFlightEvents)); err != nil {
		return err
	}
	for _, l := range open {
		if _, err := l.delegate(ctx, l.tasks[0]); err != nil {
			return err
		}
	}
	return nil
}

// topUp writes into the open runs until the store holds target events:
// whole steps of their lives, all at once, while far from it, then one
// single-event usage report at a time.
func (g *historyWriter) topUp(ctx context.Context, active []*runLife, target uint64) error {
	margin := uint64(len(active) * maxStepEvents)
	errs := make([]error, len(active))
	var wg sync.WaitGroup
	for i, l := range active {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for g.eng.Head()+margin < target && errs[i] == nil {
				errs[i] = l.step(ctx)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for g.eng.Head() < target {
		if err := active[0].reportUsage(ctx); err != nil {
			return err
		}
	}
	return nil
}

// commandID mints the next command id: every command carries one, as a
// runtime's do.
func (g *historyWriter) commandID() string { return fmt.Sprintf("h-%d", g.ids.Add(1)) }

// report prints the head every few seconds until the returned stop is called.
func (g *historyWriter) report(w io.Writer, target int64) (stop func()) {
	if w == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		start := time.Now()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				h := g.eng.Head()
				el := time.Since(start)
				fmt.Fprintf(w, "history: %d/%d events, %.0f events/s, %s\n", h, target, float64(h)/el.Seconds(), el.Round(time.Second))
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// raiseHead records that a reply named position p, for the clock.
func (g *historyWriter) raiseHead(p uint64) {
	for h := g.head.Load(); p > h; h = g.head.Load() {
		if g.head.CompareAndSwap(h, p) {
			return
		}
	}
}

// runEvents is how many events run holds, as the engine's published state
// counts them.
func (g *historyWriter) runEvents(run string) int64 {
	var n int64
	g.eng.Read(func(s *projections.State) {
		if r, ok := s.Run(run); ok {
			n = r.Usage.Events
		}
	})
	return n
}

// submit decides one command as p and decodes its result into into (when
// non-nil). A rejection is an error unless rejectionOK.
func (g *historyWriter) submit(ctx context.Context, p events.Principal, c commands.Command, into any, rejectionOK bool) error {
	r, err := g.eng.Submit(ctx, commands.Request{Principal: p, CommandID: g.commandID(), Actor: p.Actor(), Command: c})
	g.raiseHead(r.Position)
	switch {
	case err != nil:
		return fmt.Errorf("bench: history: %s: %w", c.Kind(), err)
	case r.Rejected != nil && !rejectionOK:
		return fmt.Errorf("bench: history: %s: %w", c.Kind(), r.Rejected)
	case r.Rejected != nil || into == nil:
		return nil
	}
	return decodeResult(c.Kind(), r.Result, into)
}
