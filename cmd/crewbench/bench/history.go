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
	// ActiveEvents is how many events each active run holds (default
	// DefaultActiveEvents), whatever Events and Runs: the active state is
	// the same for every size of history, and only the finished runs
	// share what is left.
	ActiveEvents int64
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

// DefaultActiveEvents is the events of each active run by default: about
// what a finished run of the 1M and 10M histories holds.
const DefaultActiveEvents = 1000

// activeWindow is the stretch of the history's clock, up to now, in which
// the active runs do their work: every finished run has ended before it, so
// it is past crewd's retention (commands.DefaultRetention) when crewd
// starts, and no finished run is hot at start-up, whatever N.
const activeWindow = time.Hour

// Errors of WriteHistory's options.
var (
	errHistoryShape  = errors.New("bench: history needs runs ≥ 1 and 0 ≤ active < runs")
	errHistoryEvents = errors.New("bench: too few events for that many runs")
	errActiveEvents  = errors.New("bench: too few events for an active run")
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
	cfg.RerouteEndedAttempts = true // crewd's rule, not a flag
	// crewd's defaults (--share-by-delegator, --worker-slot-share), as historyDaemonFlags leave them
	cfg.ShareByDelegator, cfg.WorkerSlotShare = true, true
	return cfg
}

// historyDaemonFlags are crewd's flags for historyConfig.
var historyDaemonFlags = []string{"--nesting", "--max-depth=4", "--wait-methods",
	"--max-slots", fmt.Sprint(commands.MaxMaxSlots), "--slot-share", "0",
	"--quota-events", "0", "--quota-bytes", "0", "--quota-msg-rate", "0", "--quota-reserve", "0",
	"--quota-worker-msg-share", "0", "--quota-worker-share", "0"}

// WriteHistory writes exactly o.Events events through commands.Engine, as
// crewd's engine would have decided them: o.Runs runs, each created with its
// tasks and credentials, worked through delegations (admitted, spawned and
// settled with a result message, some charged, some refused), asks, usage
// reports and mailbox traffic, then completed — except the last o.Active,
// which are left running with a delegation in flight.
//
// Each active run holds exactly o.ActiveEvents events, the same steps in the
// same order whatever o.Events and o.Runs, so the active state crewd holds
// (and its snapshot) is the same for every size of history; the finished
// runs share the rest, exactly (their shares differ by one event at most).
// The finished runs are written first, over o.Span up to activeWindow
// before now, then the active runs' work within activeWindow, then each
// active run's delegation left in flight, last.
func WriteHistory(ctx context.Context, o HistoryOptions) (HistoryStats, error) {
	if o.Runs < 1 || o.Active < 0 || o.Active >= o.Runs {
		return HistoryStats{}, errHistoryShape
	}
	if o.Submitters <= 0 {
		o.Submitters = 64
	}
	if o.Span <= 0 {
		o.Span = 7 * 24 * time.Hour
	}
	if o.ActiveEvents <= 0 {
		o.ActiveEvents = DefaultActiveEvents
	}
	if o.ActiveEvents < minActiveEvents {
		return HistoryStats{}, fmt.Errorf("%w: at least %d", errActiveEvents, minActiveEvents)
	}
	// NB: engine.configured is the one event outside every run.
	finished := o.Events - 1 - int64(o.Active)*o.ActiveEvents
	if finished < int64(o.Runs-o.Active)*minRunEvents {
		return HistoryStats{}, fmt.Errorf("%w: %d runs need at least %d events", errHistoryEvents, o.Runs,
			int64(o.Runs-o.Active)*minRunEvents+int64(o.Active)*o.ActiveEvents+1)
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
	g := &historyWriter{finished: finished, nfinished: o.Runs - o.Active, activeEvents: o.ActiveEvents,
		span: o.Span, gap: min(activeWindow, o.Span/2), target: uint64(o.Events),
		until: uint64(o.Events - int64(o.Active)*o.ActiveEvents)}
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
	if err = errors.Join(err, e.Close()); err == nil {
		err = snapshotAtHead(l)
	}
	return stats, errors.Join(err, l.Close())
}

// snapshotAtHead stores a snapshot, at the store's head, of the state crewd
// loads from it: every run that ended before the retention cold (with its
// summary and view written), the active runs whole. Why: the engine
// snapshots every so many events, so its last snapshot falls wherever that
// was, and crewd would fold a different tail after it for every store; with
// the snapshot at the head, every start decodes the active state and folds
// nothing, whatever N.
func snapshotAtHead(l *eventlog.Log) error {
	s, _, err := projections.LoadTiered(l, projections.Tiering{Retention: commands.DefaultRetention,
		MaxRetained: commands.MaxRetainedRuns, Now: time.Now().UnixMilli(), SaveViews: true, Index: true})
	if err != nil {
		return err
	}
	if _, err := s.ColdStore().SaveViews(); err != nil {
		return err
	}
	b, err := projections.EncodeSnapshot(s)
	if err != nil {
		return err
	}
	return l.SaveSnapshot(s.Position, b)
}

// historyWriter submits the commands of every run's life to one engine.
type historyWriter struct {
	eng *commands.Engine
	// finished is the events the nfinished finished runs share;
	// activeEvents each active run's.
	finished     int64
	nfinished    int
	activeEvents int64
	ids          atomic.Uint64
	span, gap    time.Duration // the history's clock: see clock
	target       uint64        // events to write
	until        uint64        // the head once every finished run is written
	head         atomic.Uint64 // the highest position a reply named
}

// share is how many events finished run k holds: an equal share of what
// the active runs leave, the remainder one event each to the first runs.
func (g *historyWriter) share(k int) int64 {
	n := int64(g.nfinished)
	s := g.finished / n
	if int64(k) < g.finished%n {
		s++
	}
	return s
}

// clock is the engine's, in proportion to the events written: span before
// now at the first event, gap before now once every finished run is
// written, now at the last event (the active runs' work is in the gap). It
// never goes back: the head only grows, and so does time.Now.
func (g *historyWriter) clock() time.Time {
	h := min(g.head.Load(), g.target)
	var ago time.Duration
	if h <= g.until {
		ago = g.span - time.Duration(float64(h)/float64(g.until)*float64(g.span-g.gap))
	} else {
		ago = g.gap - time.Duration(float64(h-g.until)/float64(g.target-g.until)*float64(g.gap))
	}
	return time.Now().Add(-ago)
}

// write plays the finished runs' lives on o.Submitters goroutines, then the
// active runs' (each until its delegation left in flight), then leaves each
// active run's delegation in flight.
func (g *historyWriter) write(ctx context.Context, o HistoryOptions) error {
	finished := o.Runs - o.Active
	if _, err := g.lives(ctx, 0, finished, o.Submitters); err != nil {
		return err
	}
	active, err := g.lives(ctx, finished, o.Runs, o.Submitters)
	if err != nil {
		return err
	}
	// NB: the delegations left in flight come last, so that they are young
	// when crewd starts: its clock times out one older than its timeout.
	for _, l := range active {
		if _, err := l.delegate(ctx, l.tasks[0]); err != nil {
			return err
		}
	}
	return nil
}

// lives plays the lives of runs from to to-1 on up to submitters goroutines,
// and returns them: the runs before g.nfinished are completed, the others
// left open.
func (g *historyWriter) lives(ctx context.Context, from, to, submitters int) ([]*runLife, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	runs := make(chan int)
	lives := make([]*runLife, to-from)
	var wg sync.WaitGroup
	for range min(submitters, to-from) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range runs {
				l := newRunLife(g, k)
				if err := l.live(ctx); err != nil {
					cancel(err)
					return
				}
				lives[k-from] = l
			}
		}()
	}
feed:
	for k := from; k < to; k++ {
		select {
		case runs <- k:
		case <-ctx.Done():
			break feed
		}
	}
	close(runs)
	wg.Wait()
	return lives, context.Cause(ctx)
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
				fmt.Fprintf(w, "history: %d/%d events, %.0f events/s, %s\n", h, target, float64(h)/el.Seconds(),
					el.Round(time.Second))
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
func (g *historyWriter) submit(ctx context.Context, p events.Principal, c commands.Command, into any,
	rejectionOK bool) error {
	r, err := g.eng.Submit(ctx, commands.Request{Principal: p, CommandID: g.commandID(), Actor: p.Actor(),
		Command: c})
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
