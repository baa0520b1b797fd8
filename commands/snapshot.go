package commands

import (
	"errors"
	"io"
	"time"

	"github.com/crewlog/crewlog/projections"
)

// DefaultSnapshotEvery is Options.SnapshotEvery when it is 0: the fewest
// events between two snapshots.
const DefaultSnapshotEvery = 100_000

// snapshotGrowth is k of the snapshot policy: the next snapshot is due
// once the events written since the last one reach k times its size in
// records (projections.State.SnapshotRecords), and at least SnapshotEvery.
// Why: a snapshot encodes the whole hot state, so taken every SnapshotEvery
// events its work per event grows with the hot state (a long, busy run
// holds tens of thousands of delegations); due after k × its size, the
// snapshot work stays at most 1/k of a record encoded per event written,
// whatever the size. The price is start-up, which decodes the snapshot and
// folds the tail after it: the tail is at most max(SnapshotEvery, k × the
// snapshot), so start-up is at most (1 + k) × a snapshot's load (an event
// folded costs about a record decoded) once the snapshot outgrows
// SnapshotEvery. k = 2: the snapshot's share of the writer's CPU is half
// what k = 1 (Redis' 100 % rewrite) would take, and start-up at most
// triples the snapshot's load.
const snapshotGrowth = 2

// snapshotAfterCold is how many runs may go cold before the next snapshot
// is taken at once, however few events passed: the snapshot holds hot runs
// whole, so it shrinks as soon as they go cold rather than SnapshotEvery
// events later (and a restart does not decode them again).
const snapshotAfterCold = 64

// snapshotMark is where the last snapshot was taken and its size.
type snapshotMark struct {
	Position uint64 // the head when it was taken (0: none)
	Records  int64  // its size, projections.State.SnapshotRecords
}

// NextSnapshotAt is the head at which the engine's next snapshot is due,
// when the last one was taken at position lastPosition (0: none) and held
// lastRecords records (projections.LoadInfo.SnapshotRecords), with
// Options.SnapshotEvery every (0: the default), unless runs go cold first.
// A benchmark that wants the daemon to snapshot writes up to it.
func NextSnapshotAt(lastPosition uint64, lastRecords, every int64) uint64 {
	if every == 0 {
		every = DefaultSnapshotEvery
	}
	return lastPosition + uint64(max(every, snapshotGrowth*lastRecords))
}

// snapshotDue is the snapshot policy (pure): a snapshot is due at head
// when the events since the last one reach NextSnapshotAt, or when
// snapshotAfterCold runs went cold since it. every < 0 disables snapshots.
func snapshotDue(last snapshotMark, head uint64, cold int, every int64) bool {
	if every < 0 || head == 0 {
		return false
	}
	return head >= NextSnapshotAt(last.Position, last.Records, every) || cold >= snapshotAfterCold
}

// maybeSnapshot starts a background snapshot when snapshotDue says so
// (publisher only). The snapshot's records are copied under the read lock
// (the writer waits at most for the copy) and encoded and saved off the
// write path.
func (e *Engine) maybeSnapshot() {
	// NB: snapping is read before the due check, which reads the last
	// snapshot's records: the saving goroutine clears snapping after it
	// stores them, so the decision uses the last snapshot's size, not the
	// one before.
	if e.snapping.Load() || !e.snapshotDueNow() || !e.snapping.CompareAndSwap(false, true) {
		return
	}
	e.markSnapshot()
	e.saveInBackground()
}

// snapshotDueNow is snapshotDue at the published head. NB: the publisher
// is the only writer of the published state, so it reads the position
// without the lock (and Close, once the publisher stopped).
func (e *Engine) snapshotDueNow() bool {
	last := snapshotMark{Position: e.lastSnap, Records: e.lastSnapRecords.Load()}
	return snapshotDue(last, e.pub.s.Position, e.coldSinceSnap, e.opts.SnapshotEvery)
}

// markSnapshot records that a snapshot is taken at the published head.
func (e *Engine) markSnapshot() { e.lastSnap, e.coldSinceSnap = e.pub.s.Position, 0 }

// saveInBackground saves a snapshot off the caller's path; the caller has
// set snapping, which is cleared once it is saved.
func (e *Engine) saveInBackground() {
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		defer e.snapping.Store(false)
		e.saveSnapshot()
	}()
}

// snapshotAtClose saves the snapshot that came due and was not taken,
// when the writer and the publisher have stopped (Close). maybeSnapshot
// runs as a group is published and starts nothing while a snapshot is in
// flight, so a snapshot that came due while the one before was saved waits
// for the next group; when none comes before the stop, the tail the next
// start folds would pass max(SnapshotEvery, k × the snapshot's records).
// A clean stop closes that window; a kill -9 in it leaves a tail of at most
// that bound plus the events written while one snapshot was saved.
func (e *Engine) snapshotAtClose() {
	if e.failure() != nil {
		return // the log failed: the next start rebuilds from what it holds
	}
	if !e.snapshotDueNow() {
		return
	}
	e.markSnapshot()
	e.saveSnapshot()
}

// saveSnapshot encodes and saves the published state. The records a
// snapshot holds are copied under the read lock (the writer waits at most
// for the copy: projections.NewSnapshotEncoder copies the hot runs'
// records and shares the cold runs' summaries) and encoded and saved off
// the write path, straight into the chunks that store it
// (eventlog.Log.SaveSnapshotFrom): the snapshot is when the daemon's
// memory peaks, and its bytes then exist once. Once saved, its size in
// records sets when the next one is due.
//
// While Options.Space reports too little free space none is saved: the
// reserve it keeps is for the log (a write that fails stops the engine),
// and a snapshot, an optimisation only, can be as large as the hot state.
// For that size it is measured once encoded, before anything is written,
// and saved only when the disk has room for it above the minimum
// (CheckSpaceFor): one that started above the minimum could otherwise
// write tens of megabytes into the reserve. The next one comes due
// SnapshotEvery events later, or at Close.
func (e *Engine) saveSnapshot() {
	if g := e.opts.Space; g != nil {
		if err := g.CheckSpace(); err != nil {
			e.opts.Logger.Warn("snapshot not saved: too little free disk space", "err", err)
			return
		}
	}
	if o, ok := e.opts.Observer.(SnapshotStarter); ok {
		o.SnapshotStarting()
	}
	var enc *projections.SnapshotEncoder
	e.Read(func(s *projections.State) { enc = projections.NewSnapshotEncoder(s) })
	pos := enc.Position()
	n, err := e.log.SaveSnapshotFrom(pos, func(w io.Writer) (int64, error) {
		n, err := enc.WriteTo(w)
		if err == nil {
			err = e.CheckSpaceFor(uint64(max(n, 0))) // NB: an error here saves nothing (SaveSnapshotFrom)
		}
		return n, err
	})
	if errors.Is(err, ErrNoSpace) {
		e.opts.Logger.Warn("snapshot not saved: too little free disk space for it", "position", pos, "bytes", n,
			"err", err)
		return
	}
	if err != nil {
		e.opts.Logger.Warn("snapshot not saved", "position", pos, "err", err)
		return
	}
	e.lastSnapRecords.Store(enc.Records())
	// NB: enc is not used from here on, so an observer that collects
	// garbage frees it.
	if o := e.opts.Observer; o != nil {
		o.Snapshotted(pos, int(n), time.Now())
	}
}
