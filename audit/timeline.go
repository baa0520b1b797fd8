package audit

import (
	"fmt"
	"math"

	"github.com/crewlog/crewlog/eventlog"
)

// Timeline reads the log from position 1 to to and calls each with the entry of every event of the run selection
// (run "" selects all), in order: the timeline a Replay that stopped at to gave its ReplayOptions.Timeline. It folds
// nothing and holds no entry, so a caller that prints a timeline after the replay that found where it stops (crewctl
// replay: the stop, the columns' widths and the state come first) reads the events a second time instead of holding
// millions of entries. to 0 reads nothing: a replay that stopped there replayed no event. An error of each ends the
// read and is returned as it is; a read error wraps eventlog.ErrCorrupt as Replay's do.
func Timeline(l *eventlog.Log, run string, to uint64, each func(Entry) error) error {
	if to == 0 {
		return nil
	}
	d := decode(l, 1, to, math.MaxInt64)
	defer d.stop()
	for b := range d.out {
		for _, ev := range b.evs {
			if !selected(run, ev.Stream) {
				continue
			}
			if err := each(entryOf(ev)); err != nil {
				return err
			}
		}
		if b.err != nil {
			return fmt.Errorf("audit: timeline: %w", b.err)
		}
		d.recycle(b)
	}
	return nil
}
