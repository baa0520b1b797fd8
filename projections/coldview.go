package projections

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/crewlog/crewlog/eventlog"
	m "github.com/crewlog/crewlog/events/msgpackappend"
)

// Views of cold runs: when a run goes cold, its records as the fold left
// them are written to the log as the run's stream view (eventlog.SaveView),
// stamped with the position of the run's last event. A query for the cold
// run then reads one value and decodes it, instead of re-folding the run
// from its scattered events: one Get, whatever the run's length.
//
// A view is never trusted over the log: it is used only when its position
// is the one the run's summary names (a run reopened and ended again has a
// newer one), and a view that is missing, of another format, stamped
// otherwise, or undecodable is ignored and the run re-folded, after which
// its view is written again. It is derived data, written without waiting
// for a sync, so a crash that loses it costs one re-fold, nothing else.
//
// The encoding is the run's record in a snapshot (snapshotRun, the same
// appended msgpack), preceded by the snapshot format, so the two cannot
// drift; DecodeSnapshot's checks guard it the same way.

// maxQueuedViews and maxQueuedViewBytes bound the runs gone cold whose view
// waits to be written (SaveViews): beyond them, a run's view is missing
// (WriteMissingView writes it in the background). A variable only so that
// tests reach the bound with a few runs.
var maxQueuedViews = 1024

const maxQueuedViewBytes = 64 << 20

type queuedView struct {
	id   string
	last uint64
	r    *runState // never mutated
}

// encodeRunView encodes hot run r as its view.
func encodeRunView(r *runState) ([]byte, error) {
	sr := snapshotRunOf(r)
	b := make([]byte, 0, 64+r.approxBytes()*3/4)
	b = m.Uint16(b, SnapshotFormat)
	b, err := appendSnapshotRun(b, &sr, nil)
	if err != nil {
		return nil, fmt.Errorf("projections: encoding the view of run %s: %w", r.run.RunID, err)
	}
	return b, nil
}

var errViewStale = errors.New("projections: view of another position")

// decodeRunView rebuilds run id, last at position last, from its view. It
// never panics: bad bytes, another format, another run or another position
// give an error.
func decodeRunView(b []byte, id string, last uint64) (r *runState, err error) {
	defer func() {
		if p := recover(); p != nil {
			r, err = nil, fmt.Errorf("%w: view of run %s: decoder panic: %v", ErrBadSnapshot, id, p)
		}
	}()
	// The fast path first (snapshot_decode.go): it needs no structural
	// check of its own.
	sr, err := decodeVersioned(b, decodeSnapshotRun)
	if err != nil {
		return nil, fmt.Errorf("%w: view of run %s: %v", ErrBadSnapshot, id, err)
	}
	switch {
	case sr.Run == nil || sr.Run.RunID != id || sr.Cold:
		return nil, fmt.Errorf("%w: view of run %s holds another record", ErrBadSnapshot, id)
	case sr.Last != last:
		return nil, errViewStale
	}
	scratch := New()
	if err := addSnapshotRun(scratch, sr); err != nil {
		return nil, fmt.Errorf("%w: view of run %s: %v", ErrBadSnapshot, id, err)
	}
	return scratch.runs[id], nil
}

// fromView reads cold run id back from its view, or returns nil when there
// is no usable one (missing, stale, unreadable: the caller re-folds).
func (c *ColdStore) fromView(id string, cr *coldRun) *runState {
	if c.refoldOnly {
		return nil
	}
	r := c.currentView(id, cr)
	if r != nil {
		c.viewReads.Add(1)
	}
	return r
}

// currentView is fromView without the count: the run read from a view
// stamped with cr.last, else nil. A usable view clears the run from the
// missing views.
func (c *ColdStore) currentView(id string, cr *coldRun) *runState {
	if c.log == nil {
		return nil
	}
	// NB: the decoder copies what it keeps (every string), so the view is
	// decoded from Pebble's bytes, not from a copy of them.
	var r *runState
	err := c.log.ViewFunc(id, func(pos uint64, b []byte) (err error) {
		if pos != cr.last {
			return errViewStale
		}
		r, err = decodeRunView(b, id, cr.last)
		return err
	})
	if err != nil {
		return nil
	}
	r.ord = cr.ord
	c.dropMissingView(id)
	return r
}

// RefoldOnly makes c ignore the views and re-fold every cold run it reads
// back: for tests and tools checking the views against the fold. Call it
// before c is shared.
func (c *ColdStore) RefoldOnly() { c.refoldOnly = true }

// SaveViewsOnEvict makes c keep the runs that EvictAll makes cold until
// SaveViews writes their views, and write the view of every run it
// re-folds. The engine turns it on; a reader of the log that never calls
// SaveViews (an offline tool) leaves it off and writes nothing. Call it
// before c is shared.
func (c *ColdStore) SaveViewsOnEvict() { c.saveViews = true }

// queueView keeps cold run id (r, never mutated again) for SaveViews.
func (c *ColdStore) queueView(id string, last uint64, r *runState) {
	if !c.saveViews {
		return
	}
	n := r.approxBytes()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queued) >= maxQueuedViews || c.queuedBytes+n > maxQueuedViewBytes {
		c.markViewMissingLocked(id) // written by WriteMissingView, or when the run is first read back
		return
	}
	c.queued = append(c.queued, queuedView{id: id, last: last, r: r})
	c.queuedBytes += n
}

// ViewsQueued reports whether runs gone cold wait for SaveViews.
func (c *ColdStore) ViewsQueued() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queued) > 0
}

// SaveViews writes the views of the runs queued since it last ran and
// returns how many it wrote. One caller at a time (the engine runs it off
// the write path). It stops at the first write error (the log failed, or
// is read-only) and drops the rest: a run without a view is re-folded.
func (c *ColdStore) SaveViews() (int, error) {
	c.mu.Lock()
	q := c.queued
	c.queued, c.queuedBytes = nil, 0
	c.mu.Unlock()
	for i, v := range q {
		if err := c.saveView(v.id, v.last, v.r); err != nil {
			c.mu.Lock()
			for _, rest := range q[i:] {
				c.markViewMissingLocked(rest.id)
			}
			c.mu.Unlock()
			return i, err
		}
		q[i] = queuedView{} // let the collector have it
	}
	return len(q), nil
}

func (c *ColdStore) saveView(id string, last uint64, r *runState) error {
	if err := c.roomToWrite(); err != nil {
		return fmt.Errorf("projections: the view of run %s waits for room: %w", id, err)
	}
	b, err := encodeRunView(r)
	if err != nil {
		return err
	}
	if err := c.log.SaveView(id, last, b); err != nil {
		return err
	}
	c.viewsSaved.Add(1)
	c.dropMissingView(id)
	return nil
}

// ViewReads is how many cold runs c read back from their view;
// ViewsSaved how many views it wrote.
func (c *ColdStore) ViewReads() int64  { return c.viewReads.Load() }
func (c *ColdStore) ViewsSaved() int64 { return c.viewsSaved.Load() }

// Missing views: a run can go cold without its view being written — more
// runs went cold at once than the queue holds (a fold from position 1 makes
// every ended run cold), a write failed, or the views on disk are of an
// older format. Such a run would be re-folded by its first query, which on
// a long history costs far more than a view read. The store keeps the set
// of cold runs whose view it does not know to be written (the snapshot
// keeps it too, as each cold summary's noView), and the engine writes them
// in the background (WriteMissingView), one at a time, off the write path.
// The set is a hint, never trusted for correctness: a view is used only
// when stamped with the position its run's summary names.

func (c *ColdStore) markViewMissingLocked(id string) {
	if !c.saveViews {
		return // nothing will write it
	}
	if c.missing == nil {
		c.missing = make(map[string]struct{})
	}
	if _, ok := c.missing[id]; !ok {
		c.missing[id] = struct{}{}
		c.missingStale = true
	}
}

func (c *ColdStore) markViewMissing(id string) {
	c.mu.Lock()
	c.markViewMissingLocked(id)
	c.mu.Unlock()
}

// dropMissingView takes run id out of the missing views: its view is written, or none can be (a run the state does
// not know, or one its log does not give back as recorded).
func (c *ColdStore) dropMissingView(id string) {
	c.mu.Lock()
	delete(c.missing, id)
	c.mu.Unlock()
}

// viewMissing reports whether run id is in the missing views.
func (c *ColdStore) viewMissing(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.missing[id]
	return ok
}

// missingIDs returns the cold runs whose view is not known to be written,
// sorted.
func (c *ColdStore) missingIDs() []string {
	c.mu.Lock()
	ids := c.missingSetLocked()
	c.mu.Unlock()
	slices.Sort(ids) // NB: outside the lock: the set may hold every cold run
	return ids
}

// missingSetLocked returns the cold runs whose view is not known to be written, in no order. Called with c.mu held.
func (c *ColdStore) missingSetLocked() []string {
	ids := make([]string, 0, len(c.missing))
	for id := range c.missing {
		ids = append(ids, id)
	}
	return ids
}

// missingAfter returns the runs of the missing set's order after cursor after, some of which may have left the set
// since (the caller asks viewMissing). NB: made again, under the store's lock, only after a run joined the set, and
// never written in place: a slice returned stays as it was.
func (c *ColdStore) missingAfter(after string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.missingStale || len(c.missing) == 0 {
		c.missingStale, c.missingOrder = false, nil
		if len(c.missing) > 0 {
			order := c.missingSetLocked()
			slices.Sort(order)
			c.missingOrder = order
			c.missingLooks.Add(int64(len(order)))
		}
	}
	i := sort.Search(len(c.missingOrder), func(i int) bool { return c.missingOrder[i] > after })
	return c.missingOrder[i:]
}

// ViewsMissing is how many cold runs have no view known to be written. NB: a run of the set read back hot since
// (FaultIn) stays in it (EvictAll) but is not counted: it has no view to write until it is cold again, and the engine
// starts a pass of the missing views, and takes a snapshot after it, whenever this is above 0.
func (c *ColdStore) ViewsMissing() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.missing)
	for id := range c.readBack {
		if _, ok := c.missing[id]; ok {
			n--
		}
	}
	return n
}

// MissingView is a cold run whose view is not known to be written, as
// MissingViews found it.
type MissingView struct {
	id string
	cr coldRun // never mutated
}

// ID is the run's id.
func (v MissingView) ID() string { return v.id }

// MissingViews returns up to n cold runs of s whose view the store does
// not know to be written, in run-id order after cursor after ("": from the
// first; a pass goes on after the last run of its batch before, so that it
// takes up each run of the set about once). Runs of the set met that s holds
// hot (read back since) are passed over and kept: one made cold again with
// no event of it since is not queued for its view (EvictAll). Those s does
// not know are dropped from it. A run whose summary cannot be read from the
// index (ErrNotReadBack) ends the list there, with the error: it stays in
// the set, since a read that failed does not say the run is unknown. But
// one whose summary is damaged (summaryDamaged) is dropped too: no view can
// be written of it, and its queries report the damage whatever the set says.
// NB: kept, it would end the list for good, and every pass would stop at it.
func (s *State) MissingViews(after string, n int) ([]MissingView, error) {
	c := s.store
	if c == nil || n <= 0 {
		return nil, nil
	}
	var out []MissingView
	for _, id := range c.missingAfter(after) {
		if len(out) == n {
			break
		}
		c.missingLooks.Add(1)
		if s.runs[id] != nil || !c.viewMissing(id) {
			continue
		}
		cr, err := s.lookupCold(id) // NB: outside the store's lock: it may read the index
		if err != nil && !summaryDamaged(err) {
			return out, err
		}
		if cr == nil {
			c.dropMissingView(id)
			continue
		}
		out = append(out, MissingView{id: id, cr: *cr})
	}
	return out, nil
}

// summaryDamaged reports whether err, met reading a run's summary from the index, is damage that a read again
// meets the same (a version that fails its checksum or does not decode), not a read that failed.
func summaryDamaged(err error) bool {
	return errors.Is(err, eventlog.ErrCorrupt) || errors.Is(err, ErrBadSnapshot)
}

// WriteMissingView makes sure cold run v has a view stamped with its last
// position: a usable view already there is kept, else the run is re-folded
// from the log and its view written. Either way the run leaves the missing
// views; on an error (the log could not be read or written) it stays, but
// for damage (an error wrapping eventlog.ErrCorrupt): no view can be
// written of a run the log does not give back as recorded, and its queries
// report the damage (ErrNotReadBack) whatever the set says. NB: kept, it
// would be first in the set for good, and every pass would stop at it.
// It neither counts as a read back (Refolds, ViewReads) nor fills the
// cache: it is housekeeping, not a query.
func (c *ColdStore) WriteMissingView(v MissingView) error {
	if c.currentView(v.id, &v.cr) != nil {
		return nil
	}
	scratch, err := foldRun(context.Background(), c.log, nil, v.id, v.cr.last)
	if err == nil && (scratch.runs[v.id] == nil || scratch.runs[v.id].last != v.cr.last) {
		err = fmt.Errorf("%w: run %s re-folded from its stream does not reach position %d", eventlog.ErrCorrupt,
			v.id, v.cr.last)
	}
	if errors.Is(err, eventlog.ErrCorrupt) {
		c.dropMissingView(v.id)
	}
	if err != nil {
		return err
	}
	return c.saveView(v.id, v.cr.last, scratch.runs[v.id])
}
