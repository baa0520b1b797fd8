package projections

import (
	"maps"
	"slices"
)

// State is every read model of crewlog, folded from the event log.
//
// Concurrency: a State is not safe for concurrent use while it is being
// applied to; readers may share a State nobody applies to any more (the
// engine publishes such views, made with Clone). Queries never return
// internal pointers, so what they return may be kept and mutated freely.
type State struct {
	// Position is the position of the last applied committed event: the
	// progress of the fold. Events applied before their commit (position 0)
	// leave it unchanged.
	Position uint64

	runs map[string]*runState // hot runs, by run id
	// nruns is the number of runs ever created, hot and cold: the next
	// run's creation ordinal (runs are listed in that order).
	nruns int
	// cold holds the summaries of the cold runs that are not in the
	// store's index of summaries (runindex.go): none once the index is
	// written, unless the log is read-only or a write failed. store reads
	// the rest back from the log. ended holds the hot runs whose status
	// is ended: the candidates for going cold.
	cold  map[string]*coldRun
	ended map[string]struct{}
	// order is the runs of runs and cold by creation ordinal, and entries of runs that left memory since
	// (runorder.go).
	order []orderedRun
	// seenAhead holds the ended hot runs whose last event an eviction pass found stamped after its clock reading,
	// with that reading: their retention counts from it (retainedFrom). At most the ended hot runs.
	seenAhead map[string]seenAhead
	store     *ColdStore
	held      map[string]string // nested slots held: subId → run id
	// waiting holds the hot runs whose Usage.SlotWaitAt is set: the candidates
	// of SlotWaiters, so it never scans every run.
	waiting map[string]struct{}
	config  Config
	// noViews are the cold runs whose view a decoded snapshot says is
	// missing, for LoadTiered to hand to the store.
	noViews []string
	// assumedWaiters are other runs' waits a recorded decision saw, and assumedHeld the slots they held, set by
	// AssumePool on a state folded from one run: zero in every fold.
	assumedWaiters, assumedHeld int
}

// runState is everything scoped to one run. Records live in maps keyed by id
// for O(1) apply; the order slices give every query a deterministic order
// (creation order) without sorting or iterating a map.
type runState struct {
	run  Run
	ord  int    // creation ordinal, 0 for the first run created
	last uint64 // position of the run's last committed event

	tasks     map[string]*Task
	taskOrder []string
	// workflowOrder is taskOrder without the shadow tasks (EachWorkflowTask).
	workflowOrder []string
	// the tasks not in a terminal status, shadow ones included, in creation order (setTaskStatus)
	live []string
	// liveWorkflow is how many of live are workflow tasks (LiveTasks).
	liveWorkflow int
	// running counts the tasks in status running, shadow ones included, by role and cwd (RunningTasks).
	running map[roleCwd]int

	dels     map[string]*Delegation // by subId
	delOrder []string
	// inFlight is delOrder without the settled delegations (EachInFlight): those that hold a slot, so at most the
	// pool's capacity, however many the run has settled.
	inFlight []string
	// slotWaiters holds the tasks whose SlotWaitAt is set: the candidates for a worker that waits for a slot
	// (worker_slots.go), so a check walks them, not the run's tasks.
	slotWaiters map[string]struct{}
	// slotsHeld counts the delegations in flight by the task whose share of the run's slots each counts for
	// (Delegation.ShareHolder), no entry for 0: kept by admission and settlement, so a worker's share of the slots
	// is read, not recounted, on every delegate.request.
	slotsHeld map[string]int

	accounts     map[string]*Account // by task id
	accountOrder []string
	// rootSpent is Σ tokensSpent of the accounts of workflow tasks (see
	// RootSpent), kept with every ledger event so that a nested-mode
	// admission reads it in O(1).
	rootSpent int64

	msgs     messageLog       // every message of the run, in append order
	msgIndex map[string]int   // message id → index in msgs
	boxes    map[string][]int // recipient → indexes in msgs
	// boxPending follows each box's messages not yet acknowledged (the
	// pending pages of Mailbox).
	boxPending map[string]*pendingIndex

	asks       map[string]*Ask // by question id
	askOrder   []string
	askPending pendingIndex // the asks still pending (AsksPage's pending pages)
	// pendingAsks is askOrder without the questions answered or timed out: what the engine clock walks at every
	// tick (DueAsks), however many questions the run has had answered.
	pendingAsks []string

	creds     map[string]*Credential // by key
	credOrder []string

	jobs     map[string]*Job // by job id (jobs.go)
	jobOrder []string
	roots    *RevokedRoots // the run's revoked lease roots (T17, T18)
}

// New returns an empty state with the default engine config in force.
func New() *State {
	return &State{
		runs:      make(map[string]*runState),
		cold:      make(map[string]*coldRun),
		ended:     make(map[string]struct{}),
		seenAhead: make(map[string]seenAhead),
		held:      make(map[string]string),
		waiting:   make(map[string]struct{}),
		config:    DefaultConfig(),
	}
}

// NB: every map is made up front (never lazily) so a state folded from events
// and one decoded from a snapshot are identical, down to nil versus empty.
func newRunState(r Run) *runState {
	return &runState{
		run:         r,
		tasks:       make(map[string]*Task),
		running:     make(map[roleCwd]int),
		dels:        make(map[string]*Delegation),
		slotWaiters: make(map[string]struct{}),
		slotsHeld:   make(map[string]int),
		accounts:    make(map[string]*Account),
		msgIndex:    make(map[string]int),
		boxes:       make(map[string][]int),
		boxPending:  make(map[string]*pendingIndex),
		asks:        make(map[string]*Ask),
		creds:       make(map[string]*Credential),
		jobs:        make(map[string]*Job),
		roots:       &RevokedRoots{set: make(map[string]struct{})},
	}
}

// Clone returns a deep copy: applying events to the copy never changes s.
// The engine keeps a working state and a published one and applies the same
// events to both. The copy shares s's ColdStore and the summaries of its
// cold runs, which nothing mutates.
func (s *State) Clone() *State {
	c := &State{
		Position:  s.Position,
		runs:      make(map[string]*runState, len(s.runs)),
		nruns:     s.nruns,
		cold:      make(map[string]*coldRun, len(s.cold)),
		ended:     make(map[string]struct{}, len(s.ended)),
		seenAhead: make(map[string]seenAhead, len(s.seenAhead)),
		store:     s.store,
		order:     cloneSlice(s.order),
		held:      make(map[string]string, len(s.held)),
		waiting:   make(map[string]struct{}, len(s.waiting)),
		config:    s.config.clone(),
	}
	for run := range s.waiting {
		c.waiting[run] = struct{}{}
	}
	for run := range s.ended {
		c.ended[run] = struct{}{}
	}
	for run, seen := range s.seenAhead {
		c.seenAhead[run] = seen
	}
	for id, cr := range s.cold {
		c.cold[id] = cr // summaries are never mutated
	}
	for id, r := range s.runs {
		c.runs[id] = r.clone()
	}
	for sub, run := range s.held {
		c.held[sub] = run
	}
	return c
}

func (r *runState) clone() *runState {
	// NB: a long run holds tens of thousands of tasks, delegations and
	// messages (the engine clones the state it loaded into its second copy,
	// replay clones at each --at): the maps are sized up front (no rehash
	// while they fill), the tasks, delegations and messages' data are copied
	// into one slab each instead of one allocation apiece, and the message
	// index, which holds no pointer to share, is copied whole. A snapshot
	// copies the records alone (copySnapshotRun), not the run.
	c := newRunState(r.run.clone())
	c.ord, c.last = r.ord, r.last
	c.tasks = make(map[string]*Task, len(r.tasks))
	tasks := make([]Task, 0, len(r.tasks))
	for id, t := range r.tasks {
		tasks = append(tasks, t.cloneValue())
		c.tasks[id] = &tasks[len(tasks)-1]
	}
	c.taskOrder = cloneSlice(r.taskOrder)
	c.workflowOrder, c.live, c.liveWorkflow = cloneSlice(r.workflowOrder), cloneSlice(r.live), r.liveWorkflow
	c.running = maps.Clone(r.running)
	c.dels = make(map[string]*Delegation, len(r.dels))
	dels := make([]Delegation, 0, len(r.dels))
	for id, d := range r.dels {
		dels = append(dels, *d)
		c.dels[id] = &dels[len(dels)-1]
	}
	c.delOrder, c.inFlight = cloneSlice(r.delOrder), cloneSlice(r.inFlight)
	maps.Copy(c.slotWaiters, r.slotWaiters)
	maps.Copy(c.slotsHeld, r.slotsHeld)
	c.accounts = make(map[string]*Account, len(r.accounts))
	for id, a := range r.accounts {
		c.accounts[id] = a.clone()
	}
	c.accountOrder = cloneSlice(r.accountOrder)
	c.rootSpent = r.rootSpent
	c.msgs = r.msgs.clone()
	c.msgIndex = maps.Clone(r.msgIndex)
	c.boxes = make(map[string][]int, len(r.boxes))
	for to, idx := range r.boxes {
		c.boxes[to] = cloneSlice(idx)
	}
	for id, a := range r.asks {
		c.asks[id] = a.clone()
	}
	boxPending := make([]pendingIndex, 0, len(r.boxPending)) // NB: one slab, as the records'
	for to, x := range r.boxPending {
		boxPending = append(boxPending, x.clone())
		c.boxPending[to] = &boxPending[len(boxPending)-1]
	}
	c.askOrder = cloneSlice(r.askOrder)
	c.askPending, c.pendingAsks = r.askPending.clone(), cloneSlice(r.pendingAsks)
	for k, cr := range r.creds {
		cc := *cr
		c.creds[k] = &cc
	}
	c.credOrder = cloneSlice(r.credOrder)
	for id, j := range r.jobs {
		c.jobs[id] = j.clone()
	}
	c.jobOrder = cloneSlice(r.jobOrder)
	c.roots = r.roots.clone()
	return c
}

// cloneSlice copies s keeping nil as nil and empty as empty, and with a
// capacity of exactly len(s): two states must never share a backing array
// that either could append into.
// dropFrom removes from s the entries drop reports, keeping the others in order, and leaves nil for none: a list
// the fold keeps of a run's active records (its delegations in flight, pending questions, a job's calls in flight),
// which a state decoded from a snapshot or a view holds as nil when it is empty.
func dropFrom[T any](s []T, drop func(T) bool) []T {
	s = slices.DeleteFunc(s, drop)
	if len(s) == 0 {
		return nil
	}
	return s
}

func cloneSlice[T any](s []T) []T {
	if s == nil {
		return nil
	}
	return append(make([]T, 0, len(s)), s...)
}
