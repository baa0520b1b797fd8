package commands

import (
	"sync"

	"github.com/crewlog/crewlog/events"
)

// runNotifier wakes followers of one run only: a channel per run that somebody waits on, closed (and forgotten) at
// the first publish that carries an event of that run. Changed wakes everyone at every publish; a follower that
// cares about one run (a subscription, the task.waitStatus waiters of a run) waits here instead, so a commit costs
// nothing to the followers of other runs.
//
// Memory: at most one channel per run somebody has waited on since that run last changed. A follower that took a
// run's channel and left (a connection closed, a wait follower's last pass) leaves it until the run's next publish,
// which a run that ended may never have, so the eviction that makes a run cold closes its channel too; one taken of
// a run already cold stays until the run publishes again: at most one per run, and only the admin creates runs.
//
// Concurrency: safe for concurrent use; publish is called by the writer only.
type runNotifier struct {
	mu    sync.Mutex
	chans map[string]chan struct{}
}

// wait returns the channel closed at the next publish of an event of runID.
func (n *runNotifier) wait(runID string) <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.chans == nil {
		n.chans = make(map[string]chan struct{})
	}
	ch := n.chans[runID]
	if ch == nil {
		ch = make(chan struct{})
		n.chans[runID] = ch
	}
	return ch
}

// publish closes the channel of every run that evs touch. NB: call it only once the state holding evs is
// published, so a woken follower reads them.
func (n *runNotifier) publish(evs []events.Event) {
	if len(evs) == 0 {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for i := range evs {
		n.wake(evs[i].Stream)
	}
}

// wake closes and forgets runID's channel, if any, with n.mu held.
func (n *runNotifier) wake(runID string) {
	if ch := n.chans[runID]; ch != nil {
		close(ch)
		delete(n.chans, runID)
	}
}

// forget closes and forgets the channels of runs runIDs: a follower still waiting is woken, reads the state and
// waits again if it still cares (a wake-up without a change is allowed).
func (n *runNotifier) forget(runIDs []string) {
	if len(runIDs) == 0 {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, id := range runIDs {
		n.wake(id)
	}
}

// RunChanged returns a channel that is closed at the next publish carrying an event of runID: take it before
// reading, and a commit after the read still wakes the caller.
func (e *Engine) RunChanged(runID string) <-chan struct{} { return e.runs.wait(runID) }
