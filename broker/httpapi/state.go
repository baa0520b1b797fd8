package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/projections"
)

// maxStateItems caps each list of a state?at answer.
const maxStateItems = 10000

// stateCache keeps the last few states rebuilt by state?at and explain, and lets one rebuild run at a time (a
// rebuild reads the log from the nearest kept state, or from position 1: CPU the daemon's writer shares). A state
// in the cache is never modified: a rebuild from it folds into a clone.
type stateCache struct {
	sem    chan struct{}
	mu     sync.Mutex
	states []*projections.State // newest use last
	queued map[string]int       // rebuild requests in progress or waiting, per principal
}

const maxCachedStates = 4

// maxRebuildsPerPrincipal bounds the rebuild requests (state?at, explain) one credential or session has in
// progress or waiting: rebuilds take turns, and one client must not queue up the CPU of all the others' turns.
const maxRebuildsPerPrincipal = 4

func (c *stateCache) init() {
	c.sem = make(chan struct{}, 1)
	c.queued = make(map[string]int)
}

// base is the kept state with the greatest position ≤ pos, or nil.
func (c *stateCache) base(pos uint64) *projections.State {
	c.mu.Lock()
	defer c.mu.Unlock()
	var best *projections.State
	for _, s := range c.states {
		if s.Position <= pos && (best == nil || s.Position > best.Position) {
			best = s
		}
	}
	return best
}

func (c *stateCache) keep(s *projections.State) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, k := range c.states {
		if k.Position == s.Position {
			c.states = append(c.states[:i], c.states[i+1:]...)
			break
		}
	}
	if len(c.states) == maxCachedStates {
		c.states = c.states[1:]
	}
	c.states = append(c.states, s)
}

// rebuild returns the state folded up to position pos by audit.Replay, starting from the nearest kept state. It
// waits for its turn, or for ctx. The state is shared: never modify it.
func (s *Server) rebuild(ctx context.Context, p principal, pos uint64) (*projections.State, error) {
	if err := s.states.turn(ctx, p); err != nil {
		return nil, err
	}
	defer s.states.done(p)
	return s.fold(pos)
}

// fold is rebuild during the caller's turn.
func (s *Server) fold(pos uint64) (*projections.State, error) {
	o := audit.ReplayOptions{To: pos}
	if b := s.states.base(pos); b != nil {
		if b.Position == pos {
			return b, nil
		}
		o.From = b.Clone()
	}
	res, err := audit.Replay(s.opts.Log, o)
	if err != nil {
		return nil, err
	}
	s.states.keep(res.State)
	return res.State, nil
}

// explainFrom re-runs the recorded decisions of run's events in (base, to] (audit.Replay with Explain) on the
// state folded up to base.
func (s *Server) explainFrom(ctx context.Context, p principal, base, to uint64, run string) (*audit.Result, error) {
	if err := s.states.turn(ctx, p); err != nil {
		return nil, err
	}
	defer s.states.done(p)
	o := audit.ReplayOptions{To: to, Run: run, Explain: true}
	if base > 0 {
		st, err := s.fold(base)
		if err != nil {
			return nil, err
		}
		o.From = st.Clone()
	}
	return audit.Replay(s.opts.Log, o)
}

// turn waits for the one rebuild slot; it refuses a principal that already has maxRebuildsPerPrincipal requests
// in progress or waiting (429).
func (c *stateCache) turn(ctx context.Context, p principal) error {
	c.mu.Lock()
	if c.queued[p.key] >= maxRebuildsPerPrincipal {
		c.mu.Unlock()
		return errorf(http.StatusTooManyRequests, codeTooManyRebuilds,
			"%d rebuilds of this credential are in progress or waiting; wait for their answers", maxRebuildsPerPrincipal)
	}
	c.queued[p.key]++
	c.mu.Unlock()
	select {
	case c.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		c.release(p)
		return ctx.Err()
	}
}

func (c *stateCache) done(p principal) {
	<-c.sem
	c.release(p)
}

func (c *stateCache) release(p principal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.queued[p.key]--; c.queued[p.key] <= 0 {
		delete(c.queued, p.key)
	}
}

// rebuildFailed answers a rebuild that did not finish: nothing when the client went, the refusal when it was
// refused its turn, else a 500.
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

// positionAt is the position of the last event whose time is ≤ at, by binary search: event times follow
// positions (one engine clock), which is what crewctl replay --at assumes too.
func positionAt(l *eventlog.Log, head uint64, at time.Time) (uint64, error) {
	ns := at.UnixNano()
	lo, hi := uint64(0), head // the answer is in [lo, hi]
	for lo < hi {
		mid := hi - (hi-lo)/2
		ev, err := l.Event(mid)
		if err != nil {
			return 0, err
		}
		if ev.Time <= ns {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo, nil
}

type stateResult struct {
	Position    uint64            `json:"position"`
	Head        uint64            `json:"head"`
	At          *time.Time        `json:"at,omitempty"`
	Run         runItem           `json:"run"`
	Tasks       []taskItem        `json:"tasks"`
	Delegations []delegationItem  `json:"delegations"`
	Ledger      []accountItem     `json:"ledger"`
	Asks        []projections.Ask `json:"asks"`
	Slots       projections.Slots `json:"slots"`
	Truncated   bool              `json:"truncated"`
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
		pos uint64
		at  *time.Time
	)
	if n, err := strconv.ParseUint(atParam, 10, 64); err == nil {
		pos = min(n, head)
	} else {
		t, err := time.Parse(time.RFC3339Nano, atParam)
		if err != nil {
			writeError(w, badParams("at must be a log position or an RFC 3339 time, got %q", atParam))
			return
		}
		at = &t
		if pos, err = positionAt(s.opts.Log, head, t); err != nil {
			writeError(w, s.internal(r, err))
			return
		}
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
		// the engine's tests prove): read it instead of folding the whole log again.
		s.opts.Engine.Read(func(st *projections.State) { out, ok = runView(st, runID) })
	} else {
		st, err := s.rebuild(r.Context(), pr, pos)
		if err != nil {
			s.rebuildFailed(w, r, err)
			return
		}
		out, ok = runView(st, runID)
	}
	if !ok {
		writeError(w, notFound("run %q did not exist yet at position %d", runID, pos))
		return
	}
	out.Head, out.At = head, at
	writeJSON(w, out)
}

// runView is run runID's lists in st, each capped at maxStateItems.
func runView(st *projections.State, runID string) (stateResult, bool) {
	run, ok := st.Run(runID)
	if !ok {
		return stateResult{}, false
	}
	out := stateResult{Position: st.Position, Run: itemOf(st, run), Slots: st.SlotsOf(runID)}
	f := projections.PageFilter{Limit: maxStateItems}
	tp, _ := st.TasksPage(runID, f)
	dp, _ := st.DelegationsPage(runID, f)
	lp, _ := st.LedgerPage(runID, f)
	out.Tasks = make([]taskItem, 0, len(tp.Items))
	for _, t := range tp.Items {
		out.Tasks = append(out.Tasks, taskOf(t))
	}
	out.Delegations = make([]delegationItem, 0, len(dp.Items))
	for _, d := range dp.Items {
		out.Delegations = append(out.Delegations, delegationOf(st, d))
	}
	out.Ledger = make([]accountItem, 0, len(lp.Items))
	for _, a := range lp.Items {
		out.Ledger = append(out.Ledger, accountOf(a))
	}
	asks := st.Asks(runID)
	out.Truncated = tp.NextCursor != "" || dp.NextCursor != "" || lp.NextCursor != "" || len(asks) > maxStateItems
	out.Asks = nonNil(asks[:min(len(asks), maxStateItems)])
	return out, true
}
