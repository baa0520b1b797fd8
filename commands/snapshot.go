package commands

import (
	"time"

	"github.com/crewlog/crewlog/projections"
)

// snapshotAfterCold is how many runs may go cold before the next snapshot
// is taken at once, however few events passed: the snapshot holds hot runs
// whole, so it shrinks as soon as they go cold rather than SnapshotEvery
// events later (and a restart does not decode them again).
const snapshotAfterCold = 64

// maybeSnapshot starts a background snapshot when enough events have been
// published since the last one, or enough runs went cold (publisher only). The state is cloned under
// the read lock (the writer waits at most for the clone) and encoded and
// saved off the write path.
func (e *Engine) maybeSnapshot() {
	// NB: the publisher is the only writer of the published state, so it
	// reads the position without the lock.
	head := e.pub.s.Position
	if e.opts.SnapshotEvery < 0 || head == 0 {
		return
	}
	if head < e.lastSnap+uint64(e.opts.SnapshotEvery) && e.coldSinceSnap < snapshotAfterCold {
		return
	}
	if !e.snapping.CompareAndSwap(false, true) {
		return
	}
	e.lastSnap, e.coldSinceSnap = head, 0
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		defer e.snapping.Store(false)
		e.saveSnapshot()
	}()
}

// saveSnapshot encodes and saves the published state. The state is cloned
// under the read lock (the writer waits at most for the clone: the hot runs
// and the cold runs' summaries) and encoded and saved off the write path,
// straight into the batch that stores it (projections.SnapshotEncoder): the
// snapshot is when the daemon's memory peaks, and its bytes then exist
// once.
func (e *Engine) saveSnapshot() {
	var c *projections.State
	e.Read(func(s *projections.State) { c = s.Clone() })
	pos := c.Position
	enc, err := projections.NewSnapshotEncoder(c)
	n := 0
	if err == nil {
		n = enc.Size()
		err = e.log.SaveSnapshotFunc(pos, n, enc.EncodeInto)
	}
	if err != nil {
		e.opts.Logger.Warn("snapshot not saved", "position", pos, "err", err)
		return
	}
	// NB: neither c nor enc is used from here on, so an observer that
	// collects garbage frees them.
	if o := e.opts.Observer; o != nil {
		o.Snapshotted(pos, n, time.Now())
	}
}
