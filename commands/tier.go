package commands

import (
	"errors"
	"time"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/projections"
)

// Tiers (projections/tier.go): the engine keeps hot the runs that have not
// ended and those that ended less than Options.Retention ago; the others go
// cold and are read back from the log when asked for. The writer faults a
// cold run in (IO, at the edge) before it decides a command naming it and
// before it applies an event of it, so Decide and Apply always see the
// whole run, and the published copy of the state (views.go) faults in,
// applies and evicts the same runs in the same order as the writer's.

// DefaultRetention is how long an ended run stays hot after its last event
// when Options.Retention is 0.
const DefaultRetention = 10 * time.Minute

// MaxRetainedRuns caps the ended runs kept in memory within the retention:
// beyond it, the ones that ended first go cold at once. Without it, the
// memory of ended runs would grow with the rate at which runs end (a
// daemon ending a run a second holds 600 of them for a 10-minute
// retention).
const MaxRetainedRuns = 64

// evictPassEvery bounds how often the writer looks for runs to make cold
// (each pass is one walk over the ended hot runs).
const evictPassEvery = time.Second

// retention is the retention in force, in ms (0 = cold at once).
func (o *Options) retention() int64 {
	switch {
	case o.Retention < 0:
		return 0
	case o.Retention == 0:
		return DefaultRetention.Milliseconds()
	}
	return o.Retention.Milliseconds()
}

// evictWith makes runs cold after f's group, which is decided and handed
// to the log but not yet to the publisher: it waits for the groups before
// it to be published and for f's to be durable, so that the log holds every
// event of the runs it makes cold (they are read back from there), and
// passes their ids with f, so that the published copy makes them cold as
// it publishes the group — as if the pipeline were one group deep, once
// per evictPassEvery.
func (e *Engine) evictWith(f *flight, now time.Time) {
	others := make([]*flight, e.depth-1)
	for i := range others {
		others[i] = e.acquire()
	}
	defer e.release(others...)
	if f.staged != nil {
		first, err := f.staged.Wait()
		f.staged = committed{first, err} // the publisher takes the result
		if err != nil {
			e.fail(err) // NB: at once, so the writer hands nothing more to the log
			return
		}
	}
	f.evicted, f.madeCold = e.evictPass(now)
}

// evictIfDue makes runs cold when a pass is due and no group is being
// decided (the idle writer), once the groups in flight are published. It
// hands the ids to the publisher, which makes the same runs cold in the
// published copy after the groups before.
func (e *Engine) evictIfDue(now time.Time) {
	if !e.evictDue(now) {
		return
	}
	fs := e.settle()
	if ids, n := e.evictPass(now); len(ids) > 0 {
		f := fs[0]
		fs = fs[1:]
		f.evicted, f.madeCold = ids, n
		e.flights <- f
	}
	e.release(fs...)
}

// evictDue reports whether an eviction pass is due at now: at most once per
// evictPassEvery (every group with no retention). now is a reading the
// writer already took (a test clock may count readings). NB: a pass plans
// the next at most evictPassEvery ahead, so a next pass further ahead of now
// was planned before the engine's time stepped back (a wall clock behind by
// more than maxHold is followed): the pass is due now, else no run would go
// cold, whatever the retention and MaxRetainedRuns, until the clock had
// made up the step.
func (e *Engine) evictDue(now time.Time) bool {
	return !now.IsZero() && (!now.Before(e.nextEvict) || e.nextEvict.Sub(now) > evictPassEvery)
}

// evictPass makes cold, in the working state, the runs whose retention has
// passed, and returns their ids for the published copy, and how many of
// them count towards the next snapshot: not those read back and made cold
// again unchanged (a refused command to a cold run), which a client could
// otherwise send to make a snapshot due at will. The writer calls it only
// with nothing in flight (settle).
func (e *Engine) evictPass(now time.Time) (ids []string, madeCold int) {
	e.nextEvict = now.Add(min(time.Duration(e.opts.retention())*time.Millisecond, evictPassEvery))
	ids, madeCold = e.work.EvictAllCounted(now.UnixMilli(), e.opts.retention(), MaxRetainedRuns)
	e.maybeSaveViews()
	return ids, madeCold
}

// maybeSaveViews writes the views of the runs gone cold (projections'
// coldview.go) in the background, one pass at a time: encoding a large
// run's records must not hold up the writer. The runs queued while a pass
// runs are written by the next one, at the next eviction pass. A pass then
// writes the missing views (writeMissingViews), unless a failed one has
// them wait (missingViewsTurn). The writer calls it, at each eviction pass.
//
// No pass starts while the disk is below its free-space minimum (CheckSpace): the reserve is the log's, and a write
// the full disk refuses fails the log stop, and crewd with it, though every command was refused. The views are
// derived data: the runs queued meanwhile stay queued (beyond the queue's bounds, missing), and the first eviction
// pass once space is back writes them.
func (e *Engine) maybeSaveViews() {
	store := e.cold
	spaceLow := e.CheckSpace() != nil
	missing := store != nil && !spaceLow && store.ViewsMissing() > 0 && e.missingViewsTurn()
	starts := store != nil && !spaceLow && (store.ViewsQueued() || missing) &&
		e.savingViews.CompareAndSwap(false, true)
	if h := e.opts.hooks; h != nil && h.missingViewsDecided != nil {
		h.missingViewsDecided(missing, starts && missing)
	}
	if !starts {
		return
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		defer e.savingViews.Store(false)
		e.viewsMu.Lock()
		defer e.viewsMu.Unlock()
		if _, err := store.SaveViews(); err != nil {
			e.opts.Logger.Warn("views of cold runs not saved; they are re-folded when read", "err", err)
			return
		}
		if missing {
			e.writeMissingViews(store)
		}
	}()
}

// missingViewsRetry is how many eviction passes (at most one a second, evictPassEvery) go by after a failed pass of
// the missing views before the next, doubled after each failure in a row up to maxMissingViewsRetry: an error that
// lasts (a disk failing its reads) costs a pass every ten minutes or so, not a re-fold at every eviction pass, and
// one that passes costs the views a short wait. NB: passes, not the clock: a clock stepped back would put the next
// pass off by the step, and the engine's clock is read by no background pass (a test's counts its readings).
const (
	missingViewsRetry    = 10
	maxMissingViewsRetry = 600
)

// missingViewsTurn reports whether a pass of the missing views may start at this eviction pass: none failed since one
// succeeded, or missingViewsWait passes went by since the failure. The writer calls it once per eviction pass.
func (e *Engine) missingViewsTurn() bool {
	if e.missingViewsWait.Load() > 0 {
		e.missingViewsWait.Add(-1)
		return false
	}
	return true
}

// putOffMissingViews makes the next pass of the missing views wait, after one that failed, and returns how many
// eviction passes.
func (e *Engine) putOffMissingViews() int64 {
	e.missingViewsBackoff = min(max(2*e.missingViewsBackoff, missingViewsRetry), maxMissingViewsRetry)
	e.missingViewsWait.Store(e.missingViewsBackoff)
	return e.missingViewsBackoff
}

// missingViewsBatch is how many cold runs writeMissingViews takes from the
// published state at a time; the views queued meanwhile are written
// between two batches.
const missingViewsBatch = 16

// writeMissingViews writes the view of every cold run that has none known
// to be written (projections.State.MissingViews: more runs went cold at
// once than the queue holds, as when the state is rebuilt from position 1
// after a change of the snapshot format, or a write failed), one run at a
// time, so that the first query of a cold run reads a view instead of
// re-folding the run. It stops when the engine closes (the next start goes
// on: the snapshot keeps the set), once the disk is below its free-space
// minimum (the first eviction pass once space is back goes on, as
// maybeSaveViews starts none before) and at the first error (a log that
// cannot be read or written; the runs are re-folded when read meanwhile),
// after which the next pass waits (putOffMissingViews). Once every view is
// written it takes a snapshot, so that a restart knows.
func (e *Engine) writeMissingViews(store *projections.ColdStore) {
	if store.ViewsMissing() == 0 {
		return
	}
	if h := e.opts.hooks; h != nil && h.missingViews != nil {
		h.missingViews()
	}
	failed := func(run string, err error) {
		e.opts.Logger.Warn("missing views of cold runs not written; they are re-folded when read, and tried "+
			"again later", "run", run, "err", err, "retryAfterEvictionPasses", e.putOffMissingViews())
	}
	start, n := time.Now(), 0
	// waitsForSpace reports whether err, the engine's CheckSpace or a write the store held back for it
	// (HoldWritesWhile), says the disk is below its free-space minimum, and logs it: not a failed pass, so the first
	// eviction pass once space is back goes on, with no wait.
	waitsForSpace := func(err error) bool {
		if !errors.Is(err, ErrNoSpace) {
			return false
		}
		e.opts.Logger.Info("writing the missing views of cold runs waits for free disk space", "written", n, "left",
			store.ViewsMissing(), "err", err)
		return true
	}
	after := "" // NB: each batch goes on after the last: a run added before it meanwhile waits for the next pass
	for {
		var batch []projections.MissingView
		var err error
		e.Read(func(s *projections.State) { batch, err = s.MissingViews(after, missingViewsBatch) })
		for _, v := range batch {
			after = v.ID()
			select {
			case <-e.quit:
				e.opts.Logger.Info("writing the missing views of cold runs stopped by close", "written", n, "left",
					store.ViewsMissing())
				return
			default:
			}
			if waitsForSpace(e.CheckSpace()) { // NB: before the run is re-folded for nothing
				return
			}
			err := store.WriteMissingView(v)
			if waitsForSpace(err) {
				return
			}
			if errors.Is(err, eventlog.ErrCorrupt) {
				// NB: the run left the set: the others after it are written all the same.
				e.opts.Logger.Warn("the view of a cold run its log does not give back is not written", "run",
					v.ID(), "err", err)
				continue
			}
			if err != nil {
				failed(v.ID(), err)
				return
			}
			n++
		}
		if err != nil {
			failed("", err)
			return
		}
		if len(batch) == 0 {
			break
		}
		if _, err := store.SaveViews(); err != nil {
			if !waitsForSpace(err) {
				failed("", err)
			}
			return
		}
	}
	e.missingViewsBackoff = 0
	e.opts.Logger.Info("missing views of cold runs written", "runs", n, "took",
		time.Since(start).Round(time.Millisecond))
	if e.opts.SnapshotEvery >= 0 && e.snapping.CompareAndSwap(false, true) {
		e.saveSnapshot()
		e.snapping.Store(false)
	}
}

// faultIn makes run id hot in the working state and notes it, so the
// published copy faults in the same run. A cold run's events are all
// durable (evictIfDue), so the log it is read back from holds them. An
// error (projections.ErrNotReadBack) leaves the working state as it was.
func (e *Engine) faultIn(id string, faulted *[]projections.Thawed) error {
	if id == "" {
		return nil
	}
	t, err := e.work.FaultIn(id) // NB: not IsCold first, which reads a summary that cannot be read as no run
	if err != nil || t == (projections.Thawed{}) {
		return err
	}
	*faulted = append(*faulted, t)
	return nil
}

// runOf names the run a command reads and writes ("" for none). It only
// saves a read: a command missing here is decided against the cold run
// read back from the log (the same records), and its events fault the run
// in before they are applied.
func runOf(c Command) string {
	switch c := c.(type) {
	case *WaitRequest:
		return c.RunID
	case *WaitResolve:
		return c.RunID
	case *AskExpire:
		return c.RunID
	case *CredentialIssue:
		return c.RunID
	case *CredentialRevoke:
		return c.RunID
	case *DelegateSpawned:
		return c.RunID
	case *DelegateSettle:
		return c.RunID
	case *DelegateCancel:
		return c.RunID
	case *DelegateExpire:
		return c.RunID
	case *DelegateRequest:
		return c.RunID
	case *Import:
		return c.RunID
	case *MessageSend:
		return c.RunID
	case *Escalate:
		return c.RunID
	case *MailboxDeliver:
		return c.RunID
	case *MailboxAck:
		return c.RunID
	case *QuotaRecheck:
		return c.RunID
	case *RunCreate:
		return c.RunID
	case *RunTransition:
		return c.RunID
	case *SteerPush:
		return c.RunID
	case *TaskCreate:
		return c.RunID
	case *TaskTransition:
		return c.RunID
	case *TaskUsage:
		return c.RunID
	case *JobCreate:
		return c.RunID
	case *JobTransition:
		return c.RunID
	case *JobDisconnect:
		return c.RunID
	case *JobRootsReset:
		return c.RunID
	case *LeaseOpen:
		return c.RunID
	case *LeaseClear:
		return c.RunID
	case *ManifestRevalidate:
		return c.RunID
	case *ProxyRequest:
		return c.RunID
	case *ProxyComplete:
		return c.RunID
	case *ProxyCancel:
		return c.RunID
	}
	return ""
}

// Warm reads cold run runID into the cold runs' cache outside the published
// state's lock, so that a query for it right after does not hold the lock
// (and so the writer) while the run is read back from the log. A no-op for
// a hot, unknown or already cached run. It returns the number of events it
// re-folded, for the caller to charge to the principal it reads for: call
// it only once that principal is authenticated and allowed to read runID.
// An error (projections.ErrNotReadBack, logged once by the engine with the
// run's id) means the run's records are not known: its queries would answer
// as if it held nothing, so the caller must answer the error instead.
func (e *Engine) Warm(runID string) (int64, error) {
	var load func() (int64, error)
	e.Read(func(s *projections.State) { load = s.Warm(runID) })
	if load == nil {
		return 0, nil
	}
	return load()
}
