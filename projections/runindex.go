package projections

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// The index of cold runs' summaries: what memory kept of every cold run
// (its Run record, the position of its last event, its creation ordinal,
// its orchestrator credential) is written to the log as the run's stream
// summary (eventlog.SaveSummaries) when the run goes cold, and the state
// keeps nothing of it: memory holds the hot runs and a count of runs, so
// it does not grow with the history. Runs pages the index by creation
// ordinal, merged with the hot runs; Run, RunStatus, Credential (the
// orchestrator's), IsCold, FaultIn and Warm find a cold run by id in it.
//
// Why written when the run goes cold, not in the batch of the event that
// ends it: the summary of an ended run still changes after that event (a
// settlement arriving late, usage, its event count), and only a cold run
// needs it; the run goes cold once every event of it is durable, so the
// summary it writes describes a prefix of the log, never more.
//
// Why a version per position: a state rebuilt from a snapshot is older
// than the index may be. A summary is stamped with the position of the
// run's last event, and a state at position P reads the newest version at
// or before P: a run created after P is unknown to it; a run cold at P is
// found with the summary it had then, even when the run was read back,
// written to and made cold again later; a run hot at P is in the
// snapshot, and a hot run always answers from memory, whatever the index
// holds. A cold run whose summary could not be written (a read-only log, a
// failed write) keeps it in memory (State.cold) until it is
// (flushSummaries).
//
// Why no summaryFormat of its own for the record's shape: a summary holds
// the orchestrator's Credential as the snapshot format has it, and only a
// state decoded from a snapshot of this format, or folded from position
// 1, reads one. The snapshot was taken
// by a build that writes summaries of this shape, and the fold (which a
// snapshot of another format causes) writes again every version it can
// read before it reads it: it makes each ended run cold at the position
// of its last event, and SaveSummaries replaces a version already there.
// So no fold reads a summary of an older shape. One path could: a run the
// fold keeps hot (a longer retention) whose older version is still in the
// index, made cold later by a copy that does not write (evict with writes
// false) after the working copy's write failed; only its orchestrator's
// actors would be missing, which no answer renders from a summary. A
// summary the decoder refused would answer its run as unknown, far worse.
//
// Durability: summaries are written without waiting for a sync (eventlog
// awaits it at its next write, for its fail stop), and the snapshot that
// stops listing a run is stored only after a sync of the WAL
// (eventlog.SaveSnapshot), so a restart never meets a snapshot without
// the summaries it relies on. The versions no state can read any more go
// with the write of a newer one (eventlog's summary_index.go).
//
// Trust: the index is derived data that an operator can remove or damage
// behind the daemon's back. LoadTiered (Tiering.Index) compares the count
// of runs the index records with what the state relies on it for, and
// rebuilds it from position 1 when they differ (checkIndex); crewctl
// verify walks it and finds what the count cannot (audit.Verify).

// summaryFormat is the version of a summary's encoding.
const summaryFormat = 1

// summaryCacheSize bounds the decoded summaries a ColdStore keeps (about
// half a KiB each), so that paging the runs list again, or asking about
// the same cold run again, skips the decode: the index is read anyway,
// for the version.
const summaryCacheSize = 4096

// summaryVersion names one version of a run's summary.
type summaryVersion struct {
	id   string
	last uint64
}

// summaryCache holds decoded summaries, the oldest dropped first. Its
// entries are never mutated.
type summaryCache struct {
	m     map[summaryVersion]*coldRun
	order []summaryVersion // insertion order, a ring of summaryCacheSize
	next  int
}

// decoded returns the summary sum holds, from the cache or decoded (and
// then cached).
func (c *ColdStore) decoded(sum eventlog.Summary) (*coldRun, error) {
	k := summaryVersion{sum.Stream, sum.Position}
	c.mu.Lock()
	cr := c.summaries.m[k]
	c.mu.Unlock()
	if cr != nil {
		return cr, nil
	}
	cr, err := decodeSummary(sum)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	sc := &c.summaries
	if sc.m == nil {
		sc.m = make(map[summaryVersion]*coldRun, summaryCacheSize)
		sc.order = make([]summaryVersion, summaryCacheSize)
	}
	if _, ok := sc.m[k]; !ok {
		delete(sc.m, sc.order[sc.next])
		sc.order[sc.next] = k
		sc.next = (sc.next + 1) % summaryCacheSize
		sc.m[k] = cr
	}
	return cr, nil
}

// summaryRecord is a summary's value: the format, then this map.
type summaryRecord struct {
	Run  *Run        `msgpack:"run"`
	Orch *Credential `msgpack:"orch"`
}

func encodeSummary(cr *coldRun) ([]byte, error) {
	b, err := msgpack.Marshal(summaryRecord{Run: &cr.run, Orch: cr.orch})
	if err != nil {
		return nil, fmt.Errorf("projections: encoding the summary of run %s: %w", cr.run.RunID, err)
	}
	return append([]byte{summaryFormat}, b...), nil
}

// decodeSummary rebuilds a cold run's summary from its stored version. It
// never panics: bad bytes give an error wrapping ErrBadSnapshot.
func decodeSummary(s eventlog.Summary) (cr *coldRun, err error) {
	defer func() {
		if p := recover(); p != nil {
			cr, err = nil, fmt.Errorf("%w: summary of run %s: decoder panic: %v", ErrBadSnapshot, s.Stream, p)
		}
	}()
	if len(s.Data) < 1 || s.Data[0] != summaryFormat {
		return nil, fmt.Errorf("%w: summary of run %s: unknown format", ErrBadSnapshot, s.Stream)
	}
	if err := checkMsgpack(s.Data[1:], 1); err != nil {
		return nil, fmt.Errorf("%w: summary of run %s: %v", ErrBadSnapshot, s.Stream, err)
	}
	var rec summaryRecord
	if err := msgpack.NewDecoder(bytes.NewReader(s.Data[1:])).Decode(&rec); err != nil {
		return nil, fmt.Errorf("%w: summary of run %s: %v", ErrBadSnapshot, s.Stream, err)
	}
	switch {
	case rec.Run == nil || rec.Run.RunID != s.Stream || !rec.Run.Status.Stale():
		return nil, fmt.Errorf("%w: summary of run %s holds another record", ErrBadSnapshot, s.Stream)
	case rec.Orch != nil && (rec.Orch.Key != events.OrchestratorKey || rec.Orch.RunID != s.Stream):
		return nil, fmt.Errorf("%w: summary of run %s: a credential other than its orchestrator's",
			ErrBadSnapshot, s.Stream)
	case s.Ord > maxOrd:
		return nil, fmt.Errorf("%w: summary of run %s: ordinal %d", ErrBadSnapshot, s.Stream, s.Ord)
	}
	return &coldRun{run: *rec.Run, last: s.Position, ord: int(s.Ord), orch: rec.Orch}, nil
}

// maxOrd bounds a creation ordinal read back (a cursor is at most 32 bits).
const maxOrd = 1<<32 - 1

// mayBeRun reports whether id can name a run: the daemon's own streams
// ($engine, $import) cannot, so the writer's check of every event's
// stream costs no read of the index for them.
func mayBeRun(id string) bool { return id != "" && !strings.HasPrefix(id, "$") }

// coldRun returns the summary of cold run id (nil when id is hot or
// unknown, or when the index cannot be read: see ColdStore.Err): from
// memory when it is kept there, else from the index as of s.Position.
func (s *State) coldRun(id string) *coldRun {
	cr, _ := s.lookupCold(id)
	return cr
}

// lookupCold is coldRun, with the error (ErrNotReadBack) met reading the run's summary from the index: a run whose
// summary cannot be read is not known to be unknown.
func (s *State) lookupCold(id string) (*coldRun, error) {
	if cr := s.cold[id]; cr != nil {
		return cr, nil
	}
	if !s.indexedRuns() || s.runs[id] != nil || !mayBeRun(id) {
		return nil, nil
	}
	return s.store.summary(id, s.Position)
}

// indexedRuns reports whether s has cold runs whose summary only the index
// holds: without, no query reads it (a state that keeps every run in
// memory never touches the log for its runs list).
func (s *State) indexedRuns() bool {
	return s.store != nil && s.store.log != nil && s.nruns > len(s.runs)+len(s.cold)
}

// summary reads run id's summary as of position upTo from the index (nil
// when there is none).
func (c *ColdStore) summary(id string, upTo uint64) (*coldRun, error) {
	if c.log == nil {
		return nil, nil
	}
	c.summaryReads.Add(1)
	sum, err := c.log.LatestSummary(id, upTo)
	if errors.Is(err, eventlog.ErrNotFound) {
		return nil, nil
	}
	var cr *coldRun
	if err == nil {
		cr, err = c.decoded(sum)
	}
	if err != nil {
		err = fmt.Errorf("%w: run %s: summary: %w", ErrNotReadBack, id, err)
		c.failed(id, err)
		return nil, err
	}
	return cr, nil
}

// failed records err, met reading run id back, for Err and the report.
func (c *ColdStore) failed(id string, err error) {
	c.mu.Lock()
	c.err = err
	c.mu.Unlock()
	if c.report != nil {
		c.report(id, err)
	}
}

// flushSummaries writes the summaries s keeps in memory to the index and
// drops them from memory once written (the runs are then found there). A
// no-op unless the store writes the index (WriteIndex).
//
// On an error they stay in memory, and the runs are answered from there,
// as if they were hot: the next eviction pass (at most one a second on the
// engine) tries again, and once a write succeeds the other copy of the
// state drops them too (EvictAll returns their ids). Why retry rather than
// fail: the summaries are derived data and the runs are answered right
// from memory meanwhile, so a failure costs memory, not answers. What
// bounds that memory: a write fails for good only once the log has failed
// stop (eventlog.ErrFailed, after a write or sync error), and then nothing
// more is appended, so no more runs end; the engine fails stop with the log
// (eventlog.Log.Failed) and the daemon restarts, and the restart writes them (the
// snapshot lists the runs it holds in memory, or the tail is folded again).
// A passing failure (a read error of the index) holds at most the runs
// that went cold until the next pass that succeeds. Each failure is
// counted (IndexWriteErrors) and reported (ReportIndexErrors).
//
// While the store holds its writes back (HoldWritesWhile: the disk below
// its free-space minimum) none is written and none fails: they stay in
// memory as above, until the first pass once there is room. What bounds
// that memory: the engine accepts no command meanwhile, so the runs that
// go cold are those hot already (on a copy of a cluster's log, those the
// writer ends meanwhile too, whose events the copy writes all the same).
func (s *State) flushSummaries() error {
	c := s.store
	if c == nil || !c.index || c.log == nil || len(s.cold) == 0 {
		return nil
	}
	if c.roomToWrite() != nil {
		return nil // NB: held back, not failed (HoldWritesWhile): the next pass with room writes them
	}
	ids := make([]string, 0, len(s.cold))
	for id := range s.cold {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	ss := make([]eventlog.Summary, 0, len(ids))
	for _, id := range ids {
		cr := s.cold[id]
		b, err := encodeSummary(cr)
		if err != nil {
			return err
		}
		ss = append(ss, eventlog.Summary{Stream: id, Ord: uint64(cr.ord), Position: cr.last, Data: b})
	}
	if err := c.log.SaveSummaries(ss); err != nil {
		return err
	}
	for _, id := range ids {
		if s.cold[id].noView {
			c.markViewMissing(id)
		}
		delete(s.cold, id)
	}
	s.leftMemory()
	return nil
}

// indexed reports whether the index holds run id's summary stamped last:
// the copy of a state that evicts a run the working copy already wrote
// keeps nothing of it in memory.
func (c *ColdStore) indexed(id string, last uint64) bool {
	if c.log == nil {
		return false
	}
	c.summaryReads.Add(1)
	sum, err := c.log.LatestSummary(id, last)
	return err == nil && sum.Position == last
}

// SummaryReads is how many single summaries c read from the index (a run
// looked up by id, or checked for a version another copy wrote); a runs
// list paged from the index is not counted. A reader's own count of the
// tables it touched would take in the store's flushes and compactions too.
func (c *ColdStore) SummaryReads() int64 { return c.summaryReads.Load() }

// eachRun calls fn with the Run record of every run s knows, by creation
// ordinal from ordinal from (descending with desc), until fn returns
// false: the runs in memory (hot, and cold ones kept in memory) merged
// with the summaries in the index as of s.Position (unless index is
// false), memory first for an ordinal found in both. fn must not keep run.
// read is the bytes of the summaries it read from the index (summaryBytes),
// those memory answered for and the versions passed over after the last
// included.
func (s *State) eachRun(from int, desc, index bool, fn func(ord int, run *Run) bool) (read int, err error) {
	mem := s.memRunsFrom(from, desc)
	// before reports whether ordinal a is visited before b.
	before := func(a, b int) bool { return a < b }
	if desc {
		before = func(a, b int) bool { return a > b }
	}
	stopped := false
	if index && s.indexedRuns() {
		var decodeErr error
		after, err := s.store.log.Summaries(uint64(from), desc, s.Position, func(sum eventlog.Summary) bool {
			read += summaryBytes(sum)
			ord := int(sum.Ord)
			for {
				memOrd, run, ok := mem.peek()
				if !ok || !before(memOrd, ord) {
					break
				}
				if !fn(memOrd, run) {
					stopped = true
					return false
				}
				mem.next()
			}
			if memOrd, _, ok := mem.peek(); ok && memOrd == ord {
				return true // memory first: the hot run, or its summary kept there
			}
			cr, err := s.store.decoded(sum)
			if err != nil {
				decodeErr = err
				return false
			}
			if !fn(ord, &cr.run) {
				stopped = true
				return false
			}
			return true
		})
		read += after // NB: the versions it passed over after the last summary it reported, which none counts
		if err == nil {
			err = decodeErr
		}
		if err != nil {
			// NB: ErrNotReadBack, as for one run's summary: the runs the index holds are not known, so the page is
			// a failed read of the log, not a fault of the caller's nor a bug.
			err = fmt.Errorf("%w: reading the index of runs: %w", ErrNotReadBack, err)
			s.store.failed("", err)
			return read, err
		}
	}
	for !stopped {
		ord, run, ok := mem.peek()
		if !ok || !fn(ord, run) {
			break
		}
		mem.next()
	}
	return read, nil
}

// summaryBytes is what reading sum from the index counts: its run id and its record, and the stored versions of
// summaries the read passed over before it (older ones of its run, or later than the state's position).
func summaryBytes(sum eventlog.Summary) int { return len(sum.Stream) + len(sum.Data) + sum.PassedOver }

// coldIDs returns the ids of s's cold runs in creation order (O(runs):
// for Whole and tests, not for the daemon).
func (s *State) coldIDs() ([]string, error) {
	var ids []string
	_, err := s.eachRun(0, false, true, func(_ int, run *Run) bool {
		if s.runs[run.RunID] == nil {
			ids = append(ids, run.RunID)
		}
		return true
	})
	return ids, err
}

// WriteIndex makes the states sharing c write the summaries of the runs
// they make cold to the log's index (EvictAll), instead of keeping them in
// memory. The engine turns it on, whether or not it writes views; an
// offline reader of the log leaves it off. Call it before c is shared.
func (c *ColdStore) WriteIndex() { c.index = true }

// ErrIndexWanting marks an index of summaries that does not hold the runs
// a state relies on it for: removed or damaged by hand.
var ErrIndexWanting = errors.New("projections: the index of summaries does not hold the runs it should")

// checkIndex compares the number of runs the log's index of summaries
// records (eventlog.Log.SummaryStreams, O(1)) with what s relies on it
// for: every cold run whose summary is not kept in memory. With exact,
// the runs in memory that have a summary in the index too (they went cold
// once and came back, or their summary was written and kept) are looked up
// (O(hot runs)) and the counts must be equal; without, the index must hold
// at least the cold runs (before the tail is folded: a run that went cold
// after the snapshot counts too). A count of 0 for a state that relies on
// the index is an index removed by hand; a count that disagrees, one
// partly removed or written by another history. Individual summaries
// removed while the count stayed are not seen here (that needs a walk of
// the index): crewctl verify finds them.
func (s *State) checkIndex(exact bool) error {
	l := s.store.log
	got, err := l.SummaryStreams()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrIndexWanting, err)
	}
	want := uint64(max(s.nruns-len(s.runs)-len(s.cold), 0))
	if !exact {
		if got < want {
			return fmt.Errorf("%w: it records %d runs; the snapshot at %d has %d cold runs whose summary "+
				"only it holds", ErrIndexWanting, got, s.Position, want)
		}
		return nil
	}
	// indexed counts id in want when the index holds a version of it.
	indexed := func(id string) error {
		_, err := l.LatestSummary(id, s.Position)
		switch {
		case errors.Is(err, eventlog.ErrNotFound):
			return nil
		case err != nil:
			return fmt.Errorf("%w: %v", ErrIndexWanting, err)
		}
		want++
		return nil
	}
	for id := range s.runs {
		if err := indexed(id); err != nil {
			return err
		}
	}
	for id := range s.cold {
		if err := indexed(id); err != nil {
			return err
		}
	}
	if got != want {
		return fmt.Errorf("%w: it records %d runs; the state at %d relies on it for %d", ErrIndexWanting, got,
			s.Position, want)
	}
	return nil
}

// ReportIndexErrors makes c call report with every failed write of cold
// runs' summaries to the index and the number of summaries then kept in
// memory (flushSummaries). Call it before c is shared.
func (c *ColdStore) ReportIndexErrors(report func(inMemory int, err error)) { c.reportIndex = report }

// IndexWriteErrors is how many writes of summaries to the index failed.
func (c *ColdStore) IndexWriteErrors() int64 { return c.indexErrors.Load() }

func (c *ColdStore) indexWriteFailed(inMemory int, err error) {
	c.indexErrors.Add(1)
	if c.reportIndex != nil {
		c.reportIndex(inMemory, err)
	}
}
