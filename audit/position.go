package audit

import (
	"time"

	"github.com/crewlog/crewlog/eventlog"
)

// PositionAt is the position a replay "at" a time stops at: the last event
// whose time is ≤ at (0 when the first event is later), found by binary
// search over the events up to head, O(log head) reads. Event times follow
// positions: one engine clock stamps them in commit order. Were the clock
// ever stepped back, the answer is still a position whose event is ≤ at and
// whose next event is later, the one the search meets. Replay --at and the
// dashboard's state?at=TIME both resolve a time here, so they agree.
func PositionAt(l *eventlog.Log, head uint64, at time.Time) (uint64, error) {
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
