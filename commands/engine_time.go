package commands

import (
	"fmt"
	"sync"
	"time"

	"github.com/crewlog/crewlog/eventlog"
)

// engineTime is the time the engine decides and records by: Options.Clock's reading, but never earlier than a time it
// handed out before or found in its log (maxHold apart). While the wall clock is behind that time (it stepped back,
// or crewd started on a host whose clock is behind the log), the engine's time goes on from it by a monotonic clock
// instead, at catchUpPace, so that events keep their order in the log, what is measured between two of its readings
// (a deadline, the message-rate window, a slot wait, a retention) takes little longer than it would have without the
// step, and the wall clock, gaining on it, is the engine's time again sixteen times the step later.
type engineTime struct {
	wall    func() time.Time
	elapsed func() time.Duration // a monotonic clock: time passed since any fixed origin
	mu      sync.Mutex
	last    time.Time     // the latest time handed out or found in the log
	lastAt  time.Duration // elapsed() when last was set
	behind  bool          // the wall clock was behind last at the last reading
}

// newEngineTime reads wall, and elapsed when not nil (default: the monotonic clock of the process).
func newEngineTime(wall func() time.Time, elapsed func() time.Duration) *engineTime {
	if elapsed == nil {
		origin := time.Now()
		elapsed = func() time.Duration { return time.Since(origin) }
	}
	return &engineTime{wall: wall, elapsed: elapsed}
}

// now is the engine's time: the wall clock's reading, or, when that is behind the latest time handed out or found,
// that time plus what the monotonic clock measured since.
func (c *engineTime) now() time.Time {
	// NB: without its monotonic reading: two readings of time.Now compare by that, which no step moves, and the
	// engine records and orders the wall readings.
	w, at := c.wall().Round(0), c.elapsed()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last, c.behind = c.next(w, at)
	c.lastAt = at
	return c.last
}

// next is the engine's time at the wall clock's reading w and the monotonic clock's at, and whether the wall clock
// is behind it; c.mu held.
func (c *engineTime) next(w time.Time, at time.Duration) (time.Time, bool) {
	if !c.behind && !w.Before(c.last) {
		return w, false
	}
	// NB: only once the wall clock was found behind: a frozen one (a test's) gives its own reading, no more.
	t := c.last.Add(catchUpPace(max(at-c.lastAt, 0)))
	// NB: a wall clock further behind than maxHold is followed: most likely one set right after a wrong step
	// forwards, which the engine's time would otherwise keep for sixteen times that step.
	if w.Before(t) && t.Sub(w) <= maxHold {
		return t, true
	}
	return w, false
}

// maxHold is the furthest the wall clock may be behind the engine's time for the engine to hold its time: an NTP
// step, a VM resumed with a clock a little behind, a restart on a host a few minutes off. Behind by more, the wall
// clock is taken as it reads (events are dated before the ones ahead of them in the log, as without the hold):
// holding a wrong step forwards of a day would date every event up to a day ahead for sixteen days.
const maxHold = time.Hour

// catchUpPace is how far the engine's time moves while the wall clock is behind it and d passes: 15/16 of d, so
// that the wall clock is the engine's time again after sixteen times the step back, and a duration measured
// meanwhile takes a fifteenth longer at most. Without it the engine's time would stay ahead by the step until the
// next restart after a pause at least as long, and date every event wrongly until then.
func catchUpPace(d time.Duration) time.Duration { return d - d/16 }

// observe makes t, the time of an event in the log (the newest at open, each one a follower catches up), a time
// the engine's never goes back from.
func (c *engineTime) observe(t time.Time) {
	at := c.elapsed()
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.last) {
		c.last, c.lastAt = t, at
	}
}

// openEngineTime is the time of an engine opened on l with o: never before the time of l's last event, so that a
// restart on a host whose clock is behind the log does not date events before it. NB: the last event by position,
// as the one read cheaply: an import's events keep their source's earlier times, so after one the bound is lower.
func openEngineTime(l *eventlog.Log, o Options) (*engineTime, error) {
	var elapsed func() time.Duration
	if o.hooks != nil {
		elapsed = o.hooks.elapsed
	}
	t := newEngineTime(o.Clock, elapsed)
	if head, _ := l.Head(); head > 0 {
		newest, err := l.Event(head)
		if err != nil {
			return nil, fmt.Errorf("commands: read the newest event: %w", err)
		}
		t.observe(time.Unix(0, newest.Time))
	}
	return t, nil
}
