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
// Memory: at most one channel per run somebody waits on. Each follower that takes a run's channel leaves it when it
// stops waiting on it (a connection closed, a wait follower's last pass), and the channel is forgotten when the last
// one leaves: a run that ended long ago (cold) or was never created publishes nothing, and an orchestrator
// subscribing to its finished run, or the admin to any run id, would otherwise leave one channel per run behind for
// good, growing with the history. The eviction that makes a run cold closes its channel too, waking its followers.
//
// Concurrency: safe for concurrent use; publish is called by the writer only.
type runNotifier struct {
	mu    sync.Mutex
	chans map[string]*runSignal
}

// runSignal is one run's channel and how many followers took it and have not left it.
type runSignal struct {
	ch     chan struct{}
	takers int
}

// wait returns the channel closed at the next publish of an event of runID, and the function that leaves it: call
// it once, when the caller stops waiting on the channel (whether it was closed or not).
func (n *runNotifier) wait(runID string) (<-chan struct{}, func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.chans == nil {
		n.chans = make(map[string]*runSignal)
	}
	sig := n.chans[runID]
	if sig == nil {
		sig = &runSignal{ch: make(chan struct{})}
		n.chans[runID] = sig
	}
	sig.takers++
	return sig.ch, func() { n.leave(runID, sig) }
}

// leave ends one follower's wait on sig, forgetting sig with its last follower. NB: a publish may have closed and
// forgotten sig already, and another follower taken a new channel of the run since: that one is not sig's to
// count down.
func (n *runNotifier) leave(runID string, sig *runSignal) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if sig.takers--; sig.takers <= 0 && n.chans[runID] == sig {
		delete(n.chans, runID)
	}
}

// held is how many runs have a channel.
func (n *runNotifier) held() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.chans)
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
	if sig := n.chans[runID]; sig != nil {
		close(sig.ch)
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

// RunChanged returns a channel that is closed at the next publish carrying an event of runID, and leave, which the
// caller calls once it no longer waits on the channel (closed or not): take it before reading, and a commit after
// the read still wakes the caller.
func (e *Engine) RunChanged(runID string) (changed <-chan struct{}, leave func()) {
	return e.runs.wait(runID)
}

// RunSignals is how many runs have a channel RunChanged gave that no publish has closed yet and a follower has not
// left: at most one per run followed, for tests.
func (e *Engine) RunSignals() int { return e.runs.held() }
