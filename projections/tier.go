package projections

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// Tiers: a State holds its hot runs whole (hot: every record in memory) and
// its cold runs as a summary only. A run may go cold (Evict) once it has
// ended (completed, failed, cancelled) and holds nothing daemon-wide: no
// slot, no pending question (an ended run waits for no slot). What a cold run
// is made of is re-folded from the log on demand: its own stream and the
// engine stream (whose config the fold reads), up to the position of the
// run's last event, so a cold run is exactly what the full fold would hold.
// What going cold writes is derived from the log and stored in it: the
// run's summary (runindex.go) and its view (coldview.go); a crash at any
// moment loses nothing the log cannot give again.
//
// Queries find a cold run through the ColdStore, which keeps the few runs
// decoded last in a small cache; the writer faults a cold run back in
// (FaultIn) before a command or an event touches it, so Decide and Apply
// only ever see whole runs.

// coldRun is the summary of a cold run: its Run record (what the runs
// list shows), the position of its last event (the version of what the
// log holds for it), its creation ordinal and its orchestrator credential
// (nil when none was issued), so that a hello naming the run is checked
// without re-folding the run before the caller is authenticated. It is
// kept in the log's index of summaries (runindex.go), and in memory only
// until it is written there.
type coldRun struct {
	run  Run
	last uint64
	ord  int
	orch *Credential // never mutated
	// noView is the snapshot's word that the run's view was not written
	// (LoadTiered hands it to the store's missing views; the store's set
	// is what counts from then on).
	noView bool
}

// DefaultColdCache is how many decoded cold runs a ColdStore keeps at most;
// ColdCacheBytes bounds the memory they take, as runState.approxBytes
// estimates it: a few large runs, or many of the usual size. The run read
// last is kept whatever its size (a query is answered from it).
const (
	DefaultColdCache = 64
	ColdCacheBytes   = 32 << 20
)

// ErrNotReadBack marks an error met reading a cold run back from the log (a read that failed, a damaged table, a
// view and a stream that do not decode): the run's records are not known, so nothing may be answered or decided
// from them. It wraps the log's error, so errors.Is(err, eventlog.ErrCorrupt) still tells damage from a failed read.
var ErrNotReadBack = errors.New("projections: a cold run could not be read back from the log")

// ColdStore reads cold runs back from the log. One store serves every
// State made from the same log (the engine's copies, their clones), and is
// safe for concurrent use.
type ColdStore struct {
	log *eventlog.Log

	mu     sync.Mutex
	cache  []*cachedRun // most recently used last; at most size
	size   int
	bytes  int64 // Σ approxBytes of the cached runs, at most ColdCacheBytes but for the last
	err    error // the last load error, for the daemon to report
	report func(run string, err error)

	refolds atomic.Int64 // runs read back from the log so far (views included)
	// summaryReads counts the single summaries read from the index
	// (runindex.go: summary, indexed).
	summaryReads atomic.Int64

	// indexErrors counts the failed writes of summaries to the index;
	// reportIndex is told of each (runindex.go).
	indexErrors atomic.Int64
	reportIndex func(inMemory int, err error)

	// room, when set, is asked before each view or summary is written (HoldWritesWhile).
	room func() error

	summaries summaryCache // decoded summaries of the index (runindex.go)

	// Views (coldview.go): saveViews is set before the store is shared;
	// queued holds the runs gone cold whose view is not written yet.
	saveViews   bool
	index       bool // write the summaries of runs gone cold (runindex.go)
	refoldOnly  bool
	queued      []queuedView
	queuedBytes int64
	missing     map[string]struct{} // cold runs whose view is not known to be written
	// missingOrder is the set's runs in id order, for MissingViews to go on after a cursor: it may hold runs that
	// have left the set since, and is made again after a run joins it (missingStale). NB: made for every batch of 16
	// (the set copied and sorted), a pass of M missing views cost O(M²/16 · log M): every cold run, after a change
	// of the views' format. missingLooks counts the runs MissingViews took up (sorted or looked at): a pass's cost.
	missingOrder []string
	missingStale bool
	missingLooks atomic.Int64
	viewReads    atomic.Int64
	viewsSaved   atomic.Int64
	// readBack holds, for each run FaultIn made hot and EvictAll has not made cold since, its last position then:
	// a run made cold again at that position is what its summary and view already hold. At most the hot runs.
	readBack map[string]uint64
}

type cachedRun struct {
	id    string
	last  uint64
	bytes int64     // r.approxBytes(), when it was cached
	r     *runState // never mutated: fault-in clones it
}

// NewColdStore returns a store reading l, keeping at most cache decoded
// runs (DefaultColdCache when cache ≤ 0).
func NewColdStore(l *eventlog.Log, cache int) *ColdStore {
	if cache <= 0 {
		cache = DefaultColdCache
	}
	return &ColdStore{log: l, size: cache}
}

// ReportErrors makes c call report with every error met reading a cold run
// back, its summary or its records (ErrNotReadBack: the daemon logs it once,
// where it happens, whichever request met it). Call it before c is shared;
// report must be safe for concurrent use.
func (c *ColdStore) ReportErrors(report func(run string, err error)) { c.report = report }

// HoldWritesWhile makes c write nothing, no view of a cold run and no summary to the index, while room returns an
// error: the disk is below its free-space minimum, whose reserve is the log's (a write the full disk refuses fails
// the log stop). Both are derived data, so nothing waits for them: a view held back is missing (WriteMissingView, or
// the next read back, writes it), and the summaries stay in memory, where their runs are answered from, until an
// EvictAll writes them once there is room. room must be cheap and safe for concurrent use; a view's write answers its
// error. Call it before c is shared.
func (c *ColdStore) HoldWritesWhile(room func() error) { c.room = room }

// roomToWrite is the error of the check HoldWritesWhile set, nil when there is room or no check.
func (c *ColdStore) roomToWrite() error {
	if c.room == nil {
		return nil
	}
	return c.room()
}

// Refolds is how many times c has read a run back from the log, from its
// view or by a re-fold (a cache hit is not one): what a read of a cold run
// cost, for tests and stats. ViewReads counts the reads from a view.
func (c *ColdStore) Refolds() int64 { return c.refolds.Load() }

// Err returns the last error met reading a cold run back (nil when none).
// A query with no error to return answers as if the run held nothing:
// Warm, FaultIn, LookupRun, LookupRunStatus and the pages of a run's
// records (TasksPage, Mailbox, …) tell it, for a caller to answer it
// instead.
func (c *ColdStore) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *ColdStore) cached(id string, last uint64) *runState {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, e := range c.cache {
		if e.id == id && e.last == last {
			c.cache = append(append(c.cache[:i:i], c.cache[i+1:]...), e)
			return e.r
		}
	}
	return nil
}

func (c *ColdStore) keep(id string, last uint64, r *runState) {
	n := r.approxBytes()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cache = slices.DeleteFunc(c.cache, func(e *cachedRun) bool {
		if e.id == id {
			c.bytes -= e.bytes
		}
		return e.id == id
	})
	c.cache = append(c.cache, &cachedRun{id: id, last: last, bytes: n, r: r})
	c.bytes += n
	for len(c.cache) > 1 && (len(c.cache) > c.size || c.bytes > ColdCacheBytes) {
		c.bytes -= c.cache[0].bytes
		c.cache = append(c.cache[:0], c.cache[1:]...)
	}
}

// CachedBytes is the estimated memory of the cold runs c keeps decoded
// (runState.approxBytes): at most ColdCacheBytes, unless the one run read
// last is larger alone.
func (c *ColdStore) CachedBytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

// Estimated heap bytes of a run's records, measured on runs of the shape
// crewbench history writes (a Go heap profile of decoded runs; strings
// other than message bodies are short ids and names): what the cold cache
// is bounded by.
const (
	runBaseBytes        = 2 << 10
	taskBytes           = 800
	delegationBytes     = 450
	accountBytes        = 300
	messageBytes        = 300 // plus the body
	askBytes            = 400
	credentialBytes     = 300 // with the headers of its actors and reason, whose bytes are counted apart
	orderEntryBytes     = 16  // a string header in an order slice
	mapEntryBytesPerRec = 48  // a map entry's share of its buckets
	jobBytes            = 1 << 10
	proxyCallBytes      = 100 // plus its id, tool and reason
)

// approxBytes estimates the heap r holds: a bound for caches, not an
// exact figure. O(messages + the calls its jobs have seen), for their bytes.
func (r *runState) approxBytes() int64 {
	recs := len(r.tasks) + len(r.dels) + len(r.accounts) + r.msgs.Len() + len(r.asks) + len(r.creds)
	n := runBaseBytes + taskBytes*len(r.tasks) + delegationBytes*len(r.dels) + accountBytes*len(r.accounts) +
		messageBytes*r.msgs.Len() + askBytes*len(r.asks) + credentialBytes*len(r.creds) +
		(orderEntryBytes+mapEntryBytesPerRec)*recs
	for i := range r.msgs.Len() {
		m := r.msgs.At(i)
		n += len(m.Body) + len(m.Subject)
	}
	for _, c := range r.creds {
		// NB: a revocation's reason is its caller's (up to 256 characters), and so are the actors' task ids.
		n += len(c.IssuedBy) + len(c.RevokedBy) + len(c.RevokedReason)
	}
	for _, j := range r.jobs {
		n += j.approxBytes()
	}
	return int64(n + listedBytes(r.roots.Roots) + mapEntryBytesPerRec*len(r.roots.Roots))
}

// approxBytes estimates the heap job j holds (runState.approxBytes). NB: its grant and the calls it has seen are
// most of a run's memory when the run delegates jobs: as many calls as the config's proxyMaxRequests, 256 tools,
// ids, names, callables and roots of their callers' choosing, hundreds of bytes each.
func (j *Job) approxBytes() int {
	n := jobBytes + len(j.JobID) + len(j.TaskID) + len(j.Status) + len(j.Root) + len(j.ManifestDigest) +
		len(j.NonceDigest) + listedBytes(j.Tools) + listedBytes(j.Fingerprints) + listedBytes(j.Callables) +
		listedBytes(j.ReadOnly) + mapEntryBytesPerRec*(len(j.Tools)+len(j.ReadOnly)) +
		(proxyCallBytes+orderEntryBytes+mapEntryBytesPerRec)*len(j.Requests)
	for _, q := range j.Requests {
		n += len(q.RequestID) + len(q.Tool) + len(q.Reason)
	}
	return n
}

// listedBytes estimates the heap of a list of strings: their headers and their bytes.
func listedBytes(ss []string) int {
	n := orderEntryBytes * len(ss)
	for _, s := range ss {
		n += len(s)
	}
	return n
}

// load returns the cold run cr (never to be mutated), from the cache or
// re-folded from the log.
func (c *ColdStore) load(id string, cr *coldRun) (*runState, error) {
	r, _, err := c.loadCounting(id, cr)
	return r, err
}

// loadCounting is load, with the number of events it re-folded (0 for a
// cache hit).
func (c *ColdStore) loadCounting(id string, cr *coldRun) (*runState, int64, error) {
	if r := c.cached(id, cr.last); r != nil {
		return r, 0, nil
	}
	r, n, err := c.fold(id, cr)
	if err != nil {
		err = fmt.Errorf("%w: run %s: %w", ErrNotReadBack, id, err)
		c.failed(id, err)
		return nil, n, err
	}
	c.keep(id, cr.last, r)
	return r, n, nil
}

// fold reads run id back from the log as of cr.last: from its view when
// it has a usable one (coldview.go), else re-folded: the run's stream
// merged, by position, with the engine stream (the slot share a refusal is
// measured against is the config's in force at that moment), through the
// same Apply the whole log goes through, into a state that holds only this
// run. It returns what the read cost: the run's events (from its summary),
// whichever way it was read.
func (c *ColdStore) fold(id string, cr *coldRun) (*runState, int64, error) {
	c.refolds.Add(1)
	n := cr.run.Usage.Events
	if r := c.fromView(id, cr); r != nil {
		return r, n, nil
	}
	scratch, err := foldRun(context.Background(), c.log, nil, id, cr.last)
	if err != nil {
		return nil, n, err
	}
	r := scratch.runs[id]
	if r == nil || r.last != cr.last {
		return nil, n, fmt.Errorf("%w: run %s re-folded from its stream does not reach position %d",
			eventlog.ErrCorrupt, id, cr.last)
	}
	r.ord = cr.ord
	if c.saveViews && c.saveView(id, cr.last, r) != nil {
		// NB: without it, the next read re-folds again, and a run read back and made cold again unchanged is not
		// queued for its view (EvictAll): the missing views are written in the background.
		c.markViewMissing(id)
	}
	return r, n, nil
}

// readStream returns the events of stream up to position upTo.
func readStream(l *eventlog.Log, stream string, upTo uint64) ([]events.Event, error) {
	var out []events.Event
	it := l.ReadStream(stream, 1)
	for it.Next() {
		e := it.Event()
		if e.Position > upTo {
			break
		}
		ev, err := FromLog(e)
		if err != nil {
			it.Close()
			return nil, err
		}
		out = append(out, ev)
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("projections: read stream %s: %w", stream, err)
	}
	return out, nil
}

// SetColdStore makes c serve s's cold runs. Only a state with a store can
// evict.
func (s *State) SetColdStore(c *ColdStore) { s.store = c }

// ColdStore returns the store serving s's cold runs (nil when none).
func (s *State) ColdStore() *ColdStore { return s.store }

// run returns run id whole, hot or read back from the log (nil when
// unknown, or when the log could not be read: see ColdStore.Err). A cold
// run is shared with other readers and must not be mutated.
func (s *State) run(id string) *runState {
	r, _ := s.lookupRun(id)
	return r
}

// lookupRun is run, with the error (ErrNotReadBack) met reading a cold run's summary or records back from the log:
// such a run is not known to hold nothing, and a query that returns an error must return it rather than an empty
// answer. A caller that read the run back before (Warm) still meets it: the run may have left the cache since, and
// its summary is read again.
func (s *State) lookupRun(id string) (*runState, error) {
	if r := s.runs[id]; r != nil {
		return r, nil
	}
	cr, err := s.lookupCold(id)
	if cr == nil {
		return nil, err
	}
	return s.loadCold(id, cr)
}

// loadCold is cold run id's records read back (cr its summary): nil, and no error, for a state decoded from a
// snapshot alone, which has no store to read its cold runs' records from.
func (s *State) loadCold(id string, cr *coldRun) (*runState, error) {
	if s.store == nil {
		return nil, nil
	}
	return s.store.load(id, cr)
}

// IsCold reports whether run id is known and cold.
// A hot run answers with no read; a cold one reads the index of summaries
// (runindex.go) unless its summary is kept in memory.
func (s *State) IsCold(id string) bool { return s.runs[id] == nil && s.coldRun(id) != nil }

// IsHot reports whether run id is held whole in memory; it reads nothing from the log (a known run that is not hot
// is cold).
func (s *State) IsHot(id string) bool { return s.runs[id] != nil }

// HotRuns is the number of runs held whole in memory; ColdRuns the number
// of cold runs (their summaries in the index, or in memory until written).
func (s *State) HotRuns() int  { return len(s.runs) }
func (s *State) ColdRuns() int { return s.nruns - len(s.runs) }

// ColdInMemory is the number of cold runs whose summary is kept in memory
// because it is not in the index (runindex.go): 0 once written.
func (s *State) ColdInMemory() int { return len(s.cold) }

// Warm reads cold run id into the store's cache, so that a query made soon
// after finds it there. It returns a function to call outside any lock the
// state is read under (it may read the log; it returns the number of events
// it re-folded, 0 when another reader cached the run first, and the error,
// ErrNotReadBack, when the run cannot be read back), or nil when there is
// nothing to read: id is hot, unknown or already cached. Only a caller
// already authorised to read run id may call it: the re-fold is the most
// expensive read a run id can cause. NB: a caller must not answer for the run
// when the function returns an error: the state's queries then answer as if
// the run held nothing.
func (s *State) Warm(id string) func() (int64, error) {
	cr, err := s.lookupCold(id)
	if err != nil {
		return func() (int64, error) { return 0, err }
	}
	if cr == nil || s.store == nil || s.store.cached(id, cr.last) != nil {
		return nil
	}
	store, c := s.store, *cr
	return func() (int64, error) {
		_, n, err := store.loadCounting(id, &c)
		return n, err
	}
}

// FaultIn makes cold run id hot again, read back from the log; it is a
// no-op for a hot or unknown run (the Thawed is then empty). The writer
// calls it before a command or an event touches the run, so Decide and
// Apply see the whole run. Errors are the log's (a read failure or
// corruption, reading its summary or its records), as ErrNotReadBack. The
// Thawed makes the same run hot in another copy of the state (ThawFrom), with
// no IO and no error.
func (s *State) FaultIn(id string) (Thawed, error) {
	cr, err := s.lookupCold(id)
	if cr == nil || err != nil {
		return Thawed{}, err
	}
	if s.store == nil {
		return Thawed{}, fmt.Errorf("projections: run %s is cold and the state has no store to read it from", id)
	}
	r, err := s.store.load(id, cr)
	if err != nil {
		return Thawed{}, err
	}
	t := Thawed{id: id, r: r}
	s.ThawFrom(t)
	s.store.noteReadBack(id, r.last)
	return t, nil
}

// noteReadBack records that run id was made hot again as of position last (FaultIn).
func (c *ColdStore) noteReadBack(id string, last uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.readBack == nil {
		c.readBack = make(map[string]uint64)
	}
	c.readBack[id] = last
}

// unchangedSinceReadBack reports whether run id, made cold now at position last, was made hot by FaultIn at that same
// position (no event of it since), and forgets it.
func (c *ColdStore) unchangedSinceReadBack(id string, last uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.readBack[id]
	delete(c.readBack, id)
	return ok && at == last
}

// Thawed is a cold run read back from the log, as FaultIn made it hot.
type Thawed struct {
	id string
	r  *runState // never mutated: ThawFrom clones it
}

// ThawFrom makes t's run hot in s as FaultIn did in another copy of the
// same state. A no-op when the run is hot in s.
func (s *State) ThawFrom(t Thawed) {
	if h := s.thaw(t); h != nil {
		s.ordered(h.ord, t.id)
	}
}

// thaw is ThawFrom but for the run's entry in s.order, which the caller makes; it returns the run made hot, nil when
// it is hot in s already.
func (s *State) thaw(t Thawed) *runState {
	if t.r == nil || s.runs[t.id] != nil {
		return nil
	}
	delete(s.cold, t.id)
	h := t.r.clone()
	s.runs[t.id] = h
	s.trackHot(h)
	return h
}

// Evictable returns the hot runs that may go cold at clock reading now
// (unix ms) with the given retention (ms): ended (completed, failed,
// cancelled) for at least the retention since their last event, holding no
// slot, no pending question; and, when more than
// maxRetained (> 0) such runs are still within the retention, the ones
// that ended first beyond that many, so the memory of ended runs does not
// grow with the rate at which runs end. Sorted, so the choice is
// deterministic. Cost: one pass over the ended hot runs. A run whose last
// event is stamped after now is measured from retainedFrom.
func (s *State) Evictable(now, retention int64, maxRetained int) []string {
	if s.store == nil || len(s.ended) == 0 {
		return nil
	}
	type candidate struct {
		id   string
		from int64
		last uint64
	}
	var out []string
	var retained []candidate
	for id := range s.ended {
		r := s.runs[id]
		if r == nil || !s.mayEvict(r) {
			continue
		}
		if from := s.retainedFrom(r, now); from <= now-retention {
			out = append(out, id)
		} else {
			retained = append(retained, candidate{id, from, r.last})
		}
	}
	if maxRetained > 0 && len(retained) > maxRetained {
		slices.SortFunc(retained, func(a, b candidate) int {
			// NB: then by the log's order: the runs stamped ahead are all measured from one reading.
			return cmp.Or(cmp.Compare(a.from, b.from), cmp.Compare(a.last, b.last), strings.Compare(a.id, b.id))
		})
		for _, c := range retained[:len(retained)-maxRetained] {
			out = append(out, c.id)
		}
	}
	slices.Sort(out)
	return out
}

// seenAhead is when an eviction pass first found an ended hot run's last event stamped after its clock reading, and
// the run's last position then (a later event of the run makes its stamp the one to measure again).
type seenAhead struct {
	at   int64 // the pass's clock reading, unix ms
	last uint64
}

// retainedFrom is the time r's retention is measured from at clock reading now: its last event's, or, when that is
// stamped after now, the reading of the pass that first found it so (noteAhead), else now. NB: an event is stamped
// after the engine's time when the clock stepped back further than the engine holds its time for, or an earlier crewd
// or an importer with a clock ahead wrote it: measured from its stamp, the run would stay hot, and hold a place of
// maxRetained from the runs that end after it, for as long as the stamp is ahead, a year for a clock a year ahead.
func (s *State) retainedFrom(r *runState, now int64) int64 {
	if r.run.UpdatedAt <= now {
		return r.run.UpdatedAt
	}
	if seen, ok := s.seenAhead[r.run.RunID]; ok && seen.last == r.last {
		return min(seen.at, now)
	}
	return now
}

// noteAhead notes, for each ended hot run whose last event is stamped after now, the reading now of the pass that
// first found it so at its last position (retainedFrom), and forgets the runs stamped no later than now.
func (s *State) noteAhead(now int64) {
	for id := range s.ended {
		r := s.runs[id]
		if r == nil || r.run.UpdatedAt <= now {
			delete(s.seenAhead, id)
		} else if seen, ok := s.seenAhead[id]; !ok || seen.last != r.last {
			s.seenAhead[id] = seenAhead{at: now, last: r.last}
		}
	}
}

// mayEvict reports whether r may go cold: ended, holding no slot and no question. NB: a place among the slot waiters
// does not keep it hot: an ended run waits for no slot (SlotWaiters counts none), and a refusal recorded after the
// end (an import) would otherwise keep the run hot for good, since only its next admission or end clears the place.
// The place leaves with the run and comes back with it (evict, ThawFrom), so a reopened run waits as the full fold's.
func (s *State) mayEvict(r *runState) bool {
	if !r.run.Status.Stale() || s.SlotsHeldBy(r.run.RunID) > 0 || r.run.WaitState != nil {
		return false
	}
	return len(r.pendingAsks) == 0
}

// Evict makes hot run id cold, keeping its summary in memory unless the
// index of summaries holds it already (runindex.go; EvictAll writes it);
// for a cold run whose summary s keeps in memory, it drops the summary
// once the index holds it (another copy's EvictAll wrote it after a failed
// write). It is a no-op for a run that may not go cold (see Evictable) or
// a state without a store. The
// evicted records are offered to the store's cache, so the next query for
// the run need not read the log.
func (s *State) Evict(id string) { s.evict(id, false) }

// evict is Evict, returning the run it made cold (nil for none). With
// writes (EvictAll, on a state that writes the index) it keeps the summary
// of every run it makes cold in memory without asking the index, for
// flushSummaries to write it next: only another copy, or the process
// before a restart, can have written it before (the index keeps a version
// once, so a duplicate is harmless), and what the index already holds (a
// run read back and made cold again with no event since) is written again
// alike.
func (s *State) evict(id string, writes bool) *runState {
	r := s.runs[id]
	if r == nil {
		if cr := s.cold[id]; cr != nil && s.store != nil && s.store.indexed(id, cr.last) {
			delete(s.cold, id) // another copy of the state wrote it after a failed write (EvictAll)
			s.leftMemory()
		}
		return nil
	}
	if s.store == nil || !s.mayEvict(r) {
		return nil
	}
	delete(s.runs, id)
	delete(s.ended, id)
	delete(s.seenAhead, id)
	delete(s.waiting, id)
	var orch *Credential
	if c := r.creds[events.OrchestratorKey]; c != nil {
		cc := *c
		orch = &cc
	}
	if writes || !s.store.indexed(id, r.last) { // else another copy of the state wrote it
		s.cold[id] = &coldRun{run: r.run.clone(), last: r.last, ord: r.ord, orch: orch}
	} else {
		s.leftMemory()
	}
	s.store.keep(id, r.last, r)
	return r
}

// trackHot enters r, a run made hot (created, decoded from a snapshot, read back from the log), in the indexes of the
// hot runs that evict takes it out of: the ended runs (trackEnded) and the slot waiters.
func (s *State) trackHot(r *runState) {
	s.trackEnded(r)
	if r.run.Usage.SlotWaitAt != 0 {
		s.waiting[r.run.RunID] = struct{}{}
	}
}

// trackEnded keeps s.ended (the eviction candidates) in step with r's
// status.
func (s *State) trackEnded(r *runState) {
	if r.run.Status.Stale() {
		s.ended[r.run.RunID] = struct{}{}
	} else {
		delete(s.ended, r.run.RunID)
		delete(s.seenAhead, r.run.RunID)
	}
}

// Whole returns a deep copy of s with every cold run read back from the
// log and hot, and no store: the state a fold that never evicts would hold.
// It holds every run in memory: for tests and tools comparing states, not
// for the daemon. NB: such a fold ran no eviction pass, so it holds no note
// of one (seenAhead): the notes time the runs' going cold, which states of
// one history do apart (an engine opened later notes at its opening).
func (s *State) Whole() (*State, error) {
	ids, err := s.coldIDs()
	if err != nil {
		return nil, err
	}
	c := s.Clone()
	c.store = nil
	clear(c.seenAhead)
	thawed := make([]orderedRun, 0, len(ids))
	for _, id := range ids {
		cr := s.coldRun(id)
		if cr == nil {
			return nil, fmt.Errorf("projections: cold run %s not read back: %v", id, s.store.Err())
		}
		r, err := s.store.load(id, cr)
		if err != nil {
			return nil, err
		}
		if h := c.thaw(Thawed{id: id, r: r}); h != nil {
			thawed = append(thawed, orderedRun{h.ord, id})
		}
	}
	c.orderedAll(thawed)
	return c, nil
}
