package broker

import (
	"sync"
	"sync/atomic"

	"github.com/crewlog/crewlog/projections"
)

// waitHub wakes a task.waitStatus waiter only when its task's status changes. For each run with waiters, one
// follower goroutine waits on the engine's per-run signal, reads the status of every task waited on in one Read,
// and closes the channel of each task whose status moved. A commit of another run wakes nobody; a commit of the
// same run that moves no waited task wakes one goroutine, not every waiter. A waiter reads its own task as it
// registers, and every reading carries the published position it was read at; the hub keeps the newest, so no
// answer is older than the request it answers, however far behind the follower is.
//
// Concurrency: safe for concurrent use. Every follower is tracked by the server's WaitGroup and ends when its run
// has no waiter left or the server closes.
type waitHub struct {
	s     *Server
	mu    sync.Mutex
	byRun map[string]*runWaits
	woken atomic.Int64 // task channels closed, for tests: a commit that moves no waited task wakes nobody
}

// runWaits are the waited tasks of one run, owned by the hub's mutex.
type runWaits struct {
	tasks map[string]*taskWatch
	kick  chan struct{} // a waiter left: the follower checks whether any remain
}

// taskWatch is the newest status the hub read for a task, the published position it was read at, and the channel
// closed when it moves.
type taskWatch struct {
	status  projections.TaskStatus
	found   bool
	at      uint64 // State.Position of the reading
	changed chan struct{}
	waiters int
}

// taskReading is a task's status as one read of the published state saw it, at position at. err is set when the
// read could not tell (projections.ErrNotReadBack: a cold run the log cannot give back): such a reading says nothing
// of the task, not that it does not exist.
type taskReading struct {
	status projections.TaskStatus
	found  bool
	at     uint64
	err    error
}

// readTask reads the status of (runID, taskID) and the position it is published at, in one read.
func readTask(s *Server, runID, taskID string) taskReading {
	var r taskReading
	s.eng.Read(func(st *projections.State) { r = readTaskIn(st, runID, taskID) })
	return r
}

func readTaskIn(st *projections.State, runID, taskID string) taskReading {
	status, ok, err := st.LookupTaskStatus(runID, taskID)
	return taskReading{status: status, found: ok, at: st.Position, err: err}
}

// observe records r unless tw holds a reading of a later position, and reports whether it moved the status, in
// which case it has woken tw's waiters; with the hub's mutex held. Readings are taken outside the mutex (the
// follower's) and by each waiter as it comes (add), so they arrive in any order: an older one must not bring back
// a status the task has left.
func (tw *taskWatch) observe(r taskReading) (moved bool) {
	if r.at < tw.at || r.err != nil {
		// NB: a reading that failed keeps the last one: only a cold run is read back, and a cold run does not change
		// (an event of it makes it hot), so the follower's next reading, at the run's next change, tells.
		return false
	}
	tw.at = r.at
	if tw.status == r.status && tw.found == r.found {
		return false
	}
	tw.status, tw.found = r.status, r.found
	close(tw.changed)
	tw.changed = make(chan struct{})
	return true
}

// observe records r for tw (taskWatch.observe), counting a wake; with h.mu held.
func (h *waitHub) observe(tw *taskWatch, r taskReading) {
	if tw.observe(r) {
		h.woken.Add(1)
	}
}

// add registers a waiter of (runID, taskID); call release exactly once when it ends, unless add failed: its error is
// its own reading's (projections.ErrNotReadBack), which registered nothing.
func (h *waitHub) add(runID, taskID string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	// NB: every waiter reads its task itself, so its answer is never older than its request (another waiter's
	// reading, or the follower's, may be); under the hub's lock, before the follower can include a new task in a
	// pass: any publish after this read either closes the follower's run signal or precedes its next read. A reading
	// that fails registers nothing, and starts no follower.
	r := readTask(h.s, runID, taskID)
	if r.err != nil {
		return r.err
	}
	rw := h.byRun[runID]
	if rw == nil {
		rw = &runWaits{tasks: make(map[string]*taskWatch), kick: make(chan struct{}, 1)}
		h.byRun[runID] = rw
		h.s.wg.Add(1)
		go h.follow(runID, rw)
	}
	tw := rw.tasks[taskID]
	if tw == nil {
		tw = &taskWatch{status: r.status, found: r.found, at: r.at, changed: make(chan struct{})}
		rw.tasks[taskID] = tw
	} else {
		h.observe(tw, r)
	}
	tw.waiters++
	return nil
}

// current is the status of a registered (runID, taskID) as the hub's newest reading saw it, whether the task
// exists, and a channel closed when that changes.
func (h *waitHub) current(runID, taskID string) (status projections.TaskStatus, found bool, changed <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	tw := h.byRun[runID].tasks[taskID]
	return tw.status, tw.found, tw.changed
}

// release ends one waiter of (runID, taskID).
func (h *waitHub) release(runID, taskID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	rw := h.byRun[runID]
	if rw == nil {
		return
	}
	if tw := rw.tasks[taskID]; tw != nil {
		if tw.waiters--; tw.waiters <= 0 {
			delete(rw.tasks, taskID)
		}
	}
	if len(rw.tasks) == 0 {
		select {
		case rw.kick <- struct{}{}:
		default:
		}
	}
}

// follow is a run's follower: at each publish of the run, re-read the waited tasks and wake the moved ones.
func (h *waitHub) follow(runID string, rw *runWaits) {
	defer h.s.wg.Done()
	type seen struct {
		id string
		r  taskReading
	}
	var batch []seen
	// pass re-reads the waited tasks once and waits for the next publish of the run: false ends the follower. NB:
	// the run's channel is left on every path, so a run that publishes nothing more (cold, or never created) keeps
	// no channel in the engine once its follower ends (commands' runNotifier).
	pass := func() bool {
		changed, leave := h.s.eng.RunChanged(runID) // before the read: a publish after it still wakes us
		defer leave()
		h.mu.Lock()
		if len(rw.tasks) == 0 {
			delete(h.byRun, runID) // a later watch starts a new follower
			h.mu.Unlock()
			return false
		}
		batch = batch[:0]
		for id := range rw.tasks {
			batch = append(batch, seen{id: id})
		}
		h.mu.Unlock()
		h.s.eng.Read(func(st *projections.State) {
			for i := range batch {
				batch[i].r = readTaskIn(st, runID, batch[i].id)
			}
		})
		h.mu.Lock()
		for _, b := range batch {
			if tw := rw.tasks[b.id]; tw != nil {
				h.observe(tw, b.r)
			}
		}
		h.mu.Unlock()
		select {
		case <-changed:
		case <-rw.kick:
		case <-h.s.quit:
			return false
		}
		return true
	}
	for pass() {
	}
}
