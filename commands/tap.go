package commands

import (
	"sync"
	"sync/atomic"

	"github.com/crewlog/crewlog/events"
)

// Tap hands its reader the events the engine publishes, in log order, as the publisher folded them: a reader that
// follows every event (the broker's mailbox feed) takes them here instead of opening an iterator on the log and
// decoding each record again at every publish.
//
// Guarantees: an event is in the tap only once the published state holds it (the publisher adds a group after
// folding it, before Changed wakes anyone for it), so the reader acts on nothing a reader of the state could not
// see yet. What one Take returns runs gapless, in log order, and a later Take returns later events. Not every event
// reaches the tap: none published before Tap was called, and none the tap dropped because its reader fell behind
// (past its bound, it drops what it held, and a group that passes the bound alone is not added). A reader that must
// see every event reads from the log, which holds them all, what lies between the last position it took and the
// first one Take gives it (or Head, when Take gives none).
//
// Memory: at most the bound's events, their payloads shared with the published state rather than copied.
//
// Concurrency: Take and Close are safe for concurrent use with the publisher; one reader takes.
type Tap struct {
	eng *Engine
	max int

	mu  sync.Mutex
	evs []events.Event
}

// Tap returns a tap of the events published from now on, holding at most bound of them (none, for a bound of 0 or
// less) until its reader takes them. Close it when done: the publisher copies every group into each open tap.
func (e *Engine) Tap(bound int) *Tap {
	t := &Tap{eng: e, max: max(bound, 0)}
	e.tapsMu.Lock()
	defer e.tapsMu.Unlock()
	list := append(append([]*Tap(nil), e.loadTaps()...), t)
	e.tapList.Store(&list)
	return t
}

// Close stops the tap: no group published after it returns is added (one being published as it is called may be,
// and is dropped with the tap).
func (t *Tap) Close() {
	e := t.eng
	e.tapsMu.Lock()
	defer e.tapsMu.Unlock()
	var list []*Tap
	for _, o := range e.loadTaps() {
		if o != t {
			list = append(list, o)
		}
	}
	e.tapList.Store(&list)
	t.mu.Lock()
	clear(t.evs)
	t.evs = nil
	t.mu.Unlock()
}

// Take appends the events published since the last Take to dst, in log order, and empties the tap. Clear what it
// returns once done with it: the events' payloads are the published state's.
func (t *Tap) Take(dst []events.Event) []events.Event {
	t.mu.Lock()
	defer t.mu.Unlock()
	dst = append(dst, t.evs...)
	clear(t.evs)
	t.evs = t.evs[:0]
	return dst
}

// add copies a published group's events into t, dropping what t holds when they would pass its bound.
func (t *Tap) add(evs []events.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.evs)+len(evs) > t.max {
		clear(t.evs)
		t.evs = t.evs[:0]
		if len(evs) > t.max {
			return // NB: a group past the bound alone (a catch-up's) is the log's to give
		}
	}
	t.evs = append(t.evs, evs...)
}

// tapSet is the engine's open taps; the publisher reads them once a group.
type tapSet struct {
	tapsMu  sync.Mutex // serialises Tap and Close
	tapList atomic.Pointer[[]*Tap]
}

func (ts *tapSet) loadTaps() []*Tap {
	if p := ts.tapList.Load(); p != nil {
		return *p
	}
	return nil
}

// publishTaps adds evs, a group just folded into the published state, to every open tap (publisher only).
func (ts *tapSet) publishTaps(evs []events.Event) {
	if len(evs) == 0 {
		return
	}
	for _, t := range ts.loadTaps() {
		t.add(evs)
	}
}
