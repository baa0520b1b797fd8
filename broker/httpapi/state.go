package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/broker/internal/turns"
	"github.com/crewlog/crewlog/projections"
)

// maxStateItems caps each list of a state?at answer (and fit its bytes).
const maxStateItems = 10000

// stateCache keeps the last few run states rebuilt by state?at and explain (each one run alone, as of a position:
// projections.RunAt), a rebuild starting from the nearest kept state of its run before its position; and it lets
// one rebuild (state?at, explain) run at a time: a rebuild reads the run's stream from the log (state?at=TIME reads
// the log up to its time first, in the same turn), CPU the daemon's writer shares. A state in the cache is never
// modified.
//
// Neither bounds its waiters, nor needs to: rebuilds is only tried (TryTake), never waited for; the slot's
// waiters are rebuild requests, each counted in rebuilds (≤ maxRebuildsPerPrincipal per principal) and each
// inside one of its credential's read turns (≤ maxReadsPerCredential). A bound on the slot's waiters, all
// principals', would let one principal's waiters refuse another's. The slot is handed to the principals waiting in
// turn (turns.Shared): one that keeps its maxRebuildsPerPrincipal queued delays another's next rebuild by one of
// its rebuilds, not by all of them, which state?at=TIME, reading the log's prefix, can make seconds each.
type stateCache struct {
	slot     *turns.Shared // the one rebuild in progress, handed to the principals waiting in turn
	rebuilds *turns.PerKey // rebuild requests in progress or waiting for the slot, per principal
	mu       sync.Mutex
	states   []*projections.State // oldest kept first; each holds one run (projections.RunAt)

	now    func() time.Time
	queued atomic.Int64 // rebuild requests of every principal in progress or waiting for the slot
	pace   atomic.Int64 // nanoseconds: the mean time the recent rebuilds held the slot (record)

	// current reports whether a principal's credential is still valid (Server.current): a rebuild that waited for
	// the slot checks it once it has the slot, before it folds.
	current func(*principal) bool
	// quit is closed when the server's Close begins (Server.quit): a rebuild waiting for the slot, or holding it,
	// ends then (untilClose).
	quit <-chan struct{}

	// holding is a test's hook: runs when a rebuild has the slot, before it folds, with the rebuild's context.
	holding func(rctx context.Context)
}

const maxCachedStates = 4

// maxRebuildsPerPrincipal bounds the rebuild requests (state?at, explain) one credential or session has in
// progress or waiting: rebuilds take turns, and one client must not queue up the CPU of all the others' turns.
const maxRebuildsPerPrincipal = 4

// maxRebuildsRetryAfter bounds the Retry-After of a 429 too-many-rebuilds, in seconds (rebuildsRetryAfter).
const maxRebuildsRetryAfter = 60

func (c *stateCache) init(now func() time.Time, current func(*principal) bool, quit <-chan struct{}) {
	c.slot = turns.NewShared()
	c.rebuilds = turns.New(maxRebuildsPerPrincipal)
	c.now, c.current, c.quit = now, current, quit
}

// Base is the kept state of run runID with the greatest position ≤ pos, or nil (audit.RunStates).
func (c *stateCache) Base(runID string, pos uint64) *projections.State {
	c.mu.Lock()
	defer c.mu.Unlock()
	var best *projections.State
	for _, s := range c.states {
		if _, ok := s.Run(runID); ok && s.Position <= pos && (best == nil || s.Position > best.Position) {
			best = s
		}
	}
	return best
}

// Keep keeps s, a state of one run, dropping the oldest kept beyond maxCachedStates (audit.RunStates).
func (c *stateCache) Keep(s *projections.State) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.states) == maxCachedStates {
		c.states = c.states[1:]
	}
	c.states = append(c.states, s)
}

// runAt returns run runID alone as of position pos (projections.RunAt: the run's stream and the engine stream,
// O(the run), not O(the log)), kept or folded during the caller's turn on from the nearest kept state of the run
// before pos. ok is false when the run did not exist yet. The state is shared: never modify it.
//
// The fold ends with ctx, the request's, within 256 events (projections.RunAt): a client that goes away
// gives the slot back then, not when the fold would have ended, and nothing is kept of its rebuild.
func (s *Server) runAt(ctx context.Context, p principal, runID string, pos uint64) (st *projections.State, ok bool, err error) {
	if b := s.states.Base(runID, pos); b != nil && b.Position == pos {
		return b, true, nil
	}
	ctx, done, err := s.states.turn(ctx, p)
	if err != nil {
		return nil, false, err
	}
	defer done()
	st, ok, err = s.foldRunAt(ctx, runID, pos)
	return st, ok, refusalFrom(ctx, err)
}

// runAtTime resolves time t to a position (audit.PositionAt) and returns run runID alone as of it, as runAt does,
// both during one turn of the caller: one rebuild, waited for once and timed once (record). st is nil, and nothing
// folded, when pos is 0 (no run yet) or the head (the published state's).
//
// NB: times do not follow positions, so the lookup reads every event of the log up to the answer, O(the position):
// the whole log's prefix, every run's, where a fold reads one run's stream. It is bounded by the head (it reads no
// further), by ctx (the request's: the read stops soon after its client goes, as audit.PositionAt looks at it) and
// by the turn it holds, the slot every rebuild waits for and one of the principal's maxRebuildsPerPrincipal.
func (s *Server) runAtTime(ctx context.Context, p principal, runID string, head uint64, t time.Time) (pos uint64,
	st *projections.State, ok bool, err error) {
	ctx, done, err := s.states.turn(ctx, p)
	if err != nil {
		return 0, nil, false, err
	}
	defer done()
	pos, read, err := audit.PositionAt(ctx, s.opts.Log, head, t)
	// NB: what it read: up to the first event later than t, that one included, or up to where it stopped
	chargeRead(ctx, int64(read))
	if err != nil {
		return 0, nil, false, refusalFrom(ctx, err)
	}
	if pos == 0 || pos >= head {
		return pos, nil, false, nil
	}
	st, ok, err = s.foldRunAt(ctx, runID, pos)
	return pos, st, ok, refusalFrom(ctx, err)
}

// foldRunAt is runAt during a turn the caller holds: the kept state at pos, or the fold on from the nearest kept
// one before it, which it keeps.
func (s *Server) foldRunAt(ctx context.Context, runID string, pos uint64) (*projections.State, bool, error) {
	b := s.states.Base(runID, pos)
	if b != nil && b.Position == pos {
		return b, true, nil
	}
	st, ok, err := projections.RunAtFrom(ctx, s.opts.Log, b, runID, pos)
	s.chargeFold(ctx, runID, b, st, err)
	if err != nil || !ok {
		return nil, ok, err
	}
	s.states.Keep(st)
	return st, true, nil
}

// explainAt re-runs the recorded decision holding position pos (audit.ExplainAt, O(the decision's run), on from
// the nearest kept state of the run) during the caller's turn; its fold ends with ctx, as runAt's does.
func (s *Server) explainAt(ctx context.Context, p principal, pos uint64) (d audit.Decision, recorded, ok bool, err error) {
	ctx, done, err := s.states.turn(ctx, p)
	if err != nil {
		return audit.Decision{}, false, false, err
	}
	defer done()
	fw := &foldWatch{states: &s.states}
	d, recorded, ok, err = audit.ExplainAt(ctx, s.opts.Log, pos, fw)
	chargeRead(ctx, int64(fw.searched))
	s.chargeFold(ctx, fw.run, fw.base, fw.kept, err)
	return d, recorded, ok, refusalFrom(ctx, err)
}

// turn waits for the one rebuild slot and returns the context to rebuild under and the function that gives the slot
// back, once; it refuses a principal that already has maxRebuildsPerPrincipal requests in progress or waiting (429,
// with rebuildsRetryAfter), one whose credential is no longer valid when the slot comes (401: credentialGone), the
// slot given back at once, and one still waiting when the server's Close begins (503: stopping). The context ends
// with ctx, once the credential no longer holds (watchCredential) and once Close begins (untilClose).
func (c *stateCache) turn(ctx context.Context, p principal) (_ context.Context, done func(), err error) {
	counted, ok := c.rebuilds.TryTake(p.key)
	if !ok {
		after := c.retryAfter()
		e := errorf(http.StatusTooManyRequests, codeTooManyRebuilds,
			"%d rebuilds of this credential are in progress or waiting; try again in %d s", maxRebuildsPerPrincipal, after)
		e.retryAfter = after
		return nil, nil, e
	}
	// NB: it waits for the slot and folds, seconds to minutes: it ends when its client goes (clientwatch.go).
	holdLong(ctx)
	c.queued.Add(1)
	ctx, unclose := c.untilClose(ctx)
	leave := func() { unclose(); c.queued.Add(-1); counted() }
	slotDone, err := c.slot.Take(ctx, p.key)
	if err != nil {
		err = refusalFrom(ctx, err)
		leave()
		return nil, nil, err
	}
	// NB: every principal's rebuilds wait for the one slot, seconds when many wait: a credential revoked (or a
	// session expired) meanwhile must not have a run folded, nor its answer, nor hold the slot from the next.
	if !c.current(&p) {
		slotDone()
		leave()
		return nil, nil, credentialGone()
	}
	rctx, unwatch := c.watchCredential(ctx, p)
	start := c.now()
	if c.holding != nil {
		c.holding(rctx)
	}
	var once sync.Once
	return rctx, func() {
		once.Do(func() {
			// NB: a rebuild its client left, or its credential, stopped early: no measure of the pace
			if rctx.Err() == nil {
				c.record(c.now().Sub(start))
			}
			unwatch()
			slotDone()
			leave()
		})
	}, nil
}

// watchCredential returns ctx ending also once p's credential no longer holds (a token revoked, a session expired),
// with credentialGone's answer as its cause (refusalFrom): a rebuild folds or reads the log for minutes on a
// large run or log, and a revoked token's must stop, as its waiting reads do, within credentialRecheck (and the events
// the fold or the read takes to look at its context again), not hold the slot from every other credential till
// its end. unwatch ends the watch.
func (c *stateCache) watchCredential(ctx context.Context, p principal) (_ context.Context, unwatch func()) {
	rctx, cancel := context.WithCancelCause(ctx)
	go func() {
		tick := time.NewTicker(credentialRecheck)
		defer tick.Stop()
		for {
			select {
			case <-rctx.Done():
				return
			case <-tick.C:
				if !c.current(&p) {
					cancel(credentialGone())
					return
				}
			}
		}
	}()
	return rctx, func() { cancel(nil) }
}

// untilClose returns ctx ending also once the server's Close begins, with stopping's answer as its cause
// (refusalFrom): Close would wait its grace (2 s) for a rebuild waiting for the slot or folding, where it ends a
// paced wait at once (awaitPaceTicking). The fold and the time's read stop at their next look at the context.
// unclose ends the watch.
func (c *stateCache) untilClose(ctx context.Context) (_ context.Context, unclose func()) {
	cctx, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-cctx.Done():
		case <-c.quit:
			cancel(stopping())
		}
	}()
	return cctx, func() { cancel(nil) }
}

// refusalFrom is err, a rebuild's under ctx (turn's), or the answer ctx's end carries as its cause: credentialGone's
// when the rebuild's credential no longer holds (watchCredential), stopping's when the server's Close began
// (untilClose).
func refusalFrom(ctx context.Context, err error) error {
	var refusal *apiError
	if err != nil && errors.As(context.Cause(ctx), &refusal) {
		return refusal
	}
	return err
}

// record adds a rebuild that held the slot for d to the pace: a moving mean weighing the latest rebuild 1/4, so a
// rebuild from a run's first event and the quick ones on from a kept state both show. Only the slot's holder
// records, so records never race one another; a rebuild whose client went records nothing (its fold stopped early,
// and the pace would promise a Retry-After sooner than rebuilds take).
func (c *stateCache) record(d time.Duration) {
	d = max(d, 0) // NB: a clock stepped back
	old := time.Duration(c.pace.Load())
	if old == 0 {
		c.pace.Store(int64(d))
		return
	}
	c.pace.Store(int64(old + (d-old)/4))
}

// retryAfter is the Retry-After of a 429 too-many-rebuilds, in whole seconds: the time the rebuilds now in
// progress or waiting, every principal's, take at the recent pace, by when the refused principal's oldest (one of
// them, served in arrival order) has its answer. At least 1, at most maxRebuildsRetryAfter.
func (c *stateCache) retryAfter() int {
	// NB: in float, so a pace thrown far by a clock step cannot overflow the product.
	secs := math.Ceil(float64(c.queued.Load()) * time.Duration(c.pace.Load()).Seconds())
	return int(min(max(secs, 1), maxRebuildsRetryAfter))
}

// rebuildFailed answers a rebuild that did not finish: nothing when the client went (its wait for the slot given up
// or its fold stopped: no answer reaches it, and its going is no failure to log), the refusal when it was refused its
// turn, else a 500.
func (s *Server) rebuildFailed(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	switch {
	case r.Context().Err() != nil:
	case errors.As(err, &ae):
		writeError(w, ae)
	default:
		writeError(w, s.internal(r, err))
	}
}

// stateResult is a state?at answer, written in this order (write). Its lists are read into lists, then fit encodes
// each item of them once into the answer's: a taskItem, delegationItem, accountItem and projections.Ask each.
type stateResult struct {
	Position    uint64
	Head        uint64
	At          *time.Time // omitted when nil
	Run         runItem
	Tasks       []json.RawMessage
	Delegations []json.RawMessage
	Ledger      []json.RawMessage
	Asks        []json.RawMessage
	Slots       stateSlots
	Truncated   bool

	lists stateLists
}

// stateLists are a state?at answer's lists as read.
type stateLists struct {
	tasks       []taskItem
	delegations []delegationItem
	ledger      []accountItem
	asks        []projections.Ask
}

// stateSlots is the slot pool as a state?at answer shows it: the capacity in force and the run's own holders, and
// the slots held daemon-wide only when the answer is the head's. A past position is folded from the run alone
// (O(the run)), which does not read the other runs' holders: held is then null, never a guess.
type stateSlots struct {
	Held     *int     `json:"held"`
	Capacity int      `json:"capacity"`
	RunHeld  int      `json:"runHeld"`
	SubIDs   []string `json:"subIds"`
}

// GET /api/v1/runs/{runId}/state?at=POSITION|TIME
func (s *Server) handleState(w http.ResponseWriter, r *http.Request, pr principal) {
	runID, e := s.runParam(r)
	p := newParams(r.URL)
	atParam := p.str("at", 64)
	if e == nil {
		e = p.strict()
	}
	if e == nil && atParam == "" {
		e = badParams("at is required: a log position or an RFC 3339 time")
	}
	if e != nil {
		writeError(w, e)
		return
	}
	head := s.opts.Engine.Head()
	var (
		pos     uint64
		at      *time.Time
		past    *projections.State // the run folded at pos, before the head
		existed bool
		err     error
	)
	asked, perr := strconv.ParseUint(atParam, 10, 64)
	byPosition := perr == nil
	if byPosition {
		if pos = min(asked, head); pos > 0 && pos < head {
			past, existed, err = s.runAt(r.Context(), pr, runID, pos)
		}
	} else {
		t, perr := time.Parse(time.RFC3339Nano, atParam)
		if perr != nil {
			writeError(w, badParams("at must be a log position or an RFC 3339 time, got %q", atParam))
			return
		}
		at = &t
		pos, past, existed, err = s.runAtTime(r.Context(), pr, runID, head, t)
	}
	if err != nil {
		s.rebuildFailed(w, r, err)
		return
	}
	if pos == 0 {
		writeError(w, notFound("run %q did not exist yet at position 0", runID))
		return
	}
	var (
		out stateResult
		ok  bool
	)
	if pos >= head {
		// The published state is the rebuild at the head (a rebuild from position 1 gives the same state, which
		// the engine's tests prove): read it instead of folding the run again. NB: unless a command committed since
		// the head was read and pos is before it now: the published state would then answer a later position than
		// the one asked for (or the one a time resolved to), and beyond the head the answer names.
		s.opts.Engine.Read(func(st *projections.State) {
			head = st.Position
			if byPosition {
				pos = min(asked, head)
			}
			if pos < head {
				return
			}
			if out, ok, err = runView(st, runID); ok {
				held := st.SlotsHeld()
				out.Slots.Held = &held
			}
		})
		if pos < head {
			if past, existed, err = s.runAt(r.Context(), pr, runID, pos); err != nil {
				s.rebuildFailed(w, r, err)
				return
			}
		}
	}
	if pos < head && existed {
		out, ok, err = runView(past, runID)
	}
	if err != nil {
		writeError(w, notReadBack()) // the run's summary or records read again at the head (ErrNotReadBack)
		return
	}
	if !ok {
		writeError(w, notFound("run %q did not exist yet at position %d", runID, pos))
		return
	}
	out.Head, out.At = head, at
	if err := out.fit(); err != nil {
		writeUnencodable(w)
		return
	}
	out.write(w)
}

// write answers out, its lists copied as they are (answer.go).
func (out *stateResult) write(w http.ResponseWriter) {
	o := newObject()
	o.value("position", out.Position)
	o.value("head", out.Head)
	if out.At != nil {
		o.value("at", out.At)
	}
	o.value("run", out.Run)
	o.list("tasks", out.Tasks)
	o.list("delegations", out.Delegations)
	o.list("ledger", out.Ledger)
	o.list("asks", out.Asks)
	o.value("slots", out.Slots)
	o.value("truncated", out.Truncated)
	o.write(w)
}

// fit cuts each list to maxPageBytes of JSON (a worker's questions may be 8K characters each, and a run may have
// thousands), outside the engine's read; truncated says so.
func (out *stateResult) fit() error {
	l := out.lists
	out.lists = stateLists{}
	var err error
	for _, list := range []struct {
		items any
		to    *[]json.RawMessage
	}{{l.tasks, &out.Tasks}, {l.delegations, &out.Delegations}, {l.ledger, &out.Ledger}, {l.asks, &out.Asks}} {
		var full bool
		*list.to, _, full, err = encodeFitting(list.items, 0)
		if err != nil {
			return err
		}
		out.Truncated = out.Truncated || full
	}
	return nil
}

// runView is run runID's lists in st, each capped at maxStateItems. The error is projections.ErrNotReadBack for a
// cold run the log cannot give back: not a run that did not exist, nor one with empty lists.
func runView(st *projections.State, runID string) (stateResult, bool, error) {
	run, ok, err := st.LookupRun(runID)
	if !ok {
		return stateResult{}, false, err
	}
	own := st.SlotsOf(runID)
	out := stateResult{Position: st.Position, Run: itemOf(st, run),
		Slots: stateSlots{Capacity: own.Capacity, RunHeld: len(own.SubIDs), SubIDs: own.SubIDs}}
	f := projections.PageFilter{Limit: maxStateItems}
	tp, err := st.TasksPage(runID, f)
	if err != nil {
		return stateResult{}, false, err
	}
	dp, err := st.DelegationsPage(runID, f)
	if err != nil {
		return stateResult{}, false, err
	}
	lp, err := st.LedgerPageWithin(runID, f, 0) // NB: counted, not sent: no history copied
	if err != nil {
		return stateResult{}, false, err
	}
	l := &out.lists
	l.tasks = make([]taskItem, 0, len(tp.Items))
	for _, t := range tp.Items {
		l.tasks = append(l.tasks, taskOf(t))
	}
	l.delegations = make([]delegationItem, 0, len(dp.Items))
	for _, d := range dp.Items {
		l.delegations = append(l.delegations, delegationOf(st, d))
	}
	l.ledger = make([]accountItem, 0, len(lp.Items))
	for _, a := range lp.Items {
		l.ledger = append(l.ledger, accountOf(a))
	}
	ap, err := st.AsksPage(runID, false, f)
	if err != nil {
		return stateResult{}, false, err
	}
	out.Truncated = tp.NextCursor != "" || dp.NextCursor != "" || lp.NextCursor != "" || ap.NextCursor != ""
	l.asks = nonNil(ap.Items)
	return out, true, nil
}
