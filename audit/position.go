package audit

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/crewlog/crewlog/eventlog"
)

// PositionAt is the position a replay "at" a time stops at: the one before the first event, in log order, whose
// time is later than at (head when there is none, 0 when the first event is later): the longest prefix of the log
// whose events are all at or before at. The dashboard's state?at=TIME resolves a time here, and Replay with At stops
// at the same position by the same rule, found by its own fold, so they agree.
//
// NB: times do not follow positions, so no search can skip events: an imported event carries its source's time
// (commands.Import, pi-crew's history), earlier than the events the engine wrote before it, and the one-shot
// import writes runs one after another, each with its own times. A binary search over such a log could land on an
// imported event at or before at that lies after the first later one, and stop past it. PositionAt reads the
// events in order up to the answer, O(the answer), as a fold up to it reads them anyway.
//
// read is the events it read, for a caller that counts what it has the log read: pos + 1 when it stopped at a later
// event (that one read too), with an error those read before it stopped (pos is then 0).
//
// ctx ends the read: the error then wraps ctx.Err().
func PositionAt(ctx context.Context, l *eventlog.Log, head uint64, at time.Time) (pos, read uint64, err error) {
	ns := nanos(at)
	it := l.ReadTransient(1)
	defer it.Close()
	for pos < head && it.Next() {
		read++
		if pos%positionAtCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				return 0, read, fmt.Errorf("audit: position at %s: %w", at.Format(time.RFC3339Nano), err)
			}
		}
		if it.Event().Time > ns {
			break
		}
		pos++
	}
	if err := it.Close(); err != nil {
		return 0, read, err
	}
	return pos, read, nil
}

// positionAtCheckEvery is how many events PositionAt reads between two looks at its context: often enough to stop
// within a millisecond or so, rare enough to cost nothing.
const positionAtCheckEvery = 1 << 10

// nanos is t in unix nanoseconds, the unit of event times, held to the times they can take: time.UnixNano wraps a
// time before 1678 or after 2262 around (the year 2300 read as before every event).
func nanos(t time.Time) int64 {
	switch {
	case t.Before(time.Unix(0, math.MinInt64)):
		return math.MinInt64
	case t.After(time.Unix(0, math.MaxInt64)):
		return math.MaxInt64
	}
	return t.UnixNano()
}
