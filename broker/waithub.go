package broker

import (
	"sync"
	"sync/atomic"

	"github.com/crewlog/crewlog/projections"
)

// waitHub wakes a task.waitStatus waiter only when its task's status changes. For each run with waiters, one
// follower goroutine waits on the engine's per-run signal, reads the status of every task waited on in one Read,
// and closes the channel of each task whose status moved. A commit of another run wakes nobody; a commit of the
// same run that moves no waited task wakes one goroutine, not every waiter.
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

// taskWatch is the status the hub last read for a task and the channel closed when it moves.
type taskWatch struct {
	status  projections.TaskStatus
	found   bool
	changed chan struct{}
	waiters int
}

// add registers a waiter of (runID, taskID); call release exactly once when it ends.
func (h *waitHub) add(runID, taskID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	rw := h.byRun[runID]
	if rw == nil {
		rw = &runWaits{tasks: make(map[string]*taskWatch), kick: make(chan struct{}, 1)}
		h.byRun[runID] = rw
		h.s.wg.Add(1)
		go h.follow(runID, rw)
	}
	tw := rw.tasks[taskID]
	if tw == nil {
		// NB: read under the hub's lock, before the follower can include this task in a pass: any publish after
		// this read either closes the follower's run signal or precedes the follower's next read.
		tw = &taskWatch{changed: make(chan struct{})}
		tw.status, tw.found = taskStatus(h.s, runID, taskID)
		rw.tasks[taskID] = tw
	}
	tw.waiters++
}

// current is the status of a registered (runID, taskID) as the hub last read it, whether the task exists, and a
// channel closed when that changes.
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
		id     string
		status projections.TaskStatus
		found  bool
	}
	var batch []seen
	for {
		changed := h.s.eng.RunChanged(runID) // before the read: a publish after it still wakes us
		h.mu.Lock()
		if len(rw.tasks) == 0 {
			delete(h.byRun, runID) // a later watch starts a new follower
			h.mu.Unlock()
			return
		}
		batch = batch[:0]
		for id := range rw.tasks {
			batch = append(batch, seen{id: id})
		}
		h.mu.Unlock()
		h.s.eng.Read(func(st *projections.State) {
			for i := range batch {
				var t projections.Task
				t, batch[i].found = st.Task(runID, batch[i].id)
				batch[i].status = t.Status
			}
		})
		h.mu.Lock()
		for _, b := range batch {
			if tw := rw.tasks[b.id]; tw != nil && (tw.status != b.status || tw.found != b.found) {
				tw.status, tw.found = b.status, b.found
				close(tw.changed)
				h.woken.Add(1)
				tw.changed = make(chan struct{})
			}
		}
		h.mu.Unlock()
		select {
		case <-changed:
		case <-rw.kick:
		case <-h.s.quit:
			return
		}
	}
}
