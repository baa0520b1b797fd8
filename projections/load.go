package projections

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// FromLog turns a stored record into a domain event, decoding (and, for an
// older schema version, upcasting) its payload. A payload that does not
// decode is corruption of the log, reported as such; one of a type or a
// schema version this build does not know is a *NewerEventError.
func FromLog(r *eventlog.Event) (events.Event, error) { return FromLogWith(nil, r) }

// FromLogWith is FromLog decoding with dec, which shares repeated strings
// between the payloads it decodes (see events.Decoder); a nil dec is
// FromLog. Like dec, it belongs to one goroutine.
func FromLogWith(dec *events.Decoder, r *eventlog.Event) (events.Event, error) {
	p, err := dec.Decode(r.Type, r.SchemaVersion, r.Payload)
	if err != nil {
		if newerEvent(r, err) {
			return events.Event{}, &NewerEventError{Position: r.Position, Type: r.Type,
				SchemaVersion: r.SchemaVersion, Err: err}
		}
		return events.Event{}, &eventlog.CorruptError{
			Position: r.Position, Key: fmt.Sprintf("e/%d", r.Position), Reason: err.Error(),
		}
	}
	return events.Event{
		Position: r.Position, Stream: r.Stream, StreamVersion: r.StreamVersion, Type: r.Type,
		SchemaVersion: r.SchemaVersion, Time: r.Time, CommandID: r.CommandID, CausationID: r.CausationID,
		CorrelationID: r.CorrelationID, Actor: events.Actor{Role: r.ActorRole, TaskID: r.ActorTask}, Payload: p,
	}, nil
}

// Replay folds the durable events from position s.Position+1 up to and
// including to (0 = the durable head) into s. An event of a cold run faults
// the run in first (FaultIn); a state with cold runs and no ColdStore (one
// decoded from a snapshot) gets one reading l. Replay makes no run cold. It
// checks the hash chain as it reads (eventlog.Log.ReadChained): a broken
// link is a *eventlog.CorruptError naming the record.
func Replay(s *State, l *eventlog.Log, to uint64) error {
	_, err := replay(s, l, to, Tiering{Retention: -1})
	return err
}

// Tiering says which runs a loaded state keeps hot (tier.go).
type Tiering struct {
	// Retention is how long an ended run stays hot after its last event,
	// by event time while the log is folded and by Now at the end; < 0
	// keeps every run hot.
	Retention time.Duration
	// Now is the clock reading (unix ms) the final eviction is measured
	// against; 0 skips it.
	Now int64
	// MaxRetained, when > 0, caps the ended runs kept hot within the
	// retention: the ones that ended first go cold beyond it (Evictable).
	MaxRetained int
	// Cache is the ColdStore's cache size (DefaultColdCache when ≤ 0).
	Cache int
	// SaveViews turns on the views of cold runs (ColdStore.SaveViewsOnEvict)
	// before the fold: the runs it makes cold are queued for SaveViews.
	SaveViews bool
	// Index makes the state write the summaries of the runs it makes cold
	// to the log's index (ColdStore.WriteIndex), so that memory does not
	// grow with them, and checks at load that the index holds every run
	// the snapshot relies on it for, rebuilding it from position 1 when
	// not (checkIndex). Without it the cold runs' summaries stay in memory
	// (an offline reader of the log). It is independent of SaveViews.
	Index bool
	// RefoldOnly makes the ColdStore ignore the views of cold runs and
	// re-fold them (ColdStore.RefoldOnly).
	RefoldOnly bool
	// NoSnapshot folds from position 1 even when there is a snapshot: the
	// check that a snapshot is an optimisation only.
	NoSnapshot bool

	rebuilding bool // set by rebuildIndex: a second shortfall is an error
}

var errSnapshotSkipped = errors.New("projections: snapshot not read (Tiering.NoSnapshot)")

// evictEvery is how much event time passes between two eviction passes of
// a fold: with retention R, an ended run goes cold within R + evictEvery of
// its last event.
const evictEvery = int64(1000)

// evictEveryEvents is how many events a fold reads between two eviction passes at most, whatever their times say.
const evictEveryEvents = 4096

func replay(s *State, l *eventlog.Log, to uint64, t Tiering) (evicted int, err error) {
	if s.store == nil && (s.ColdRuns() > 0 || t.Retention >= 0) {
		s.store = NewColdStore(l, t.Cache)
	}
	retention := t.Retention.Milliseconds()
	nextPass, sincePass := int64(0), 0
	// NB: chained, as the offline replay reads it: a record whose checksum holds but whose hash does not follow its
	// predecessor's is not what the writer wrote there, and the state a daemon answers from must not build on it.
	it := l.ReadChained(s.Position + 1)
	dec := events.NewDecoder() // shares repeated strings across the fold
	for it.Next() {
		r := it.Event()
		if to > 0 && r.Position > to {
			break
		}
		ev, err := FromLogWith(dec, r)
		if err == nil {
			_, err = s.FaultIn(ev.Stream)
		}
		if err != nil {
			it.Close()
			return evicted, err
		}
		Apply(s, ev)
		if t.Retention < 0 {
			continue
		}
		// NB: times go back in log order (an import keeps its source's), so a pass comes every evictEveryEvents
		// events as well: by time alone, none would come after a later event until the log's times were past it
		// again, and every run folded meanwhile would stay hot.
		at := ev.UnixMilli()
		if sincePass++; at >= nextPass || sincePass >= evictEveryEvents {
			evicted += len(s.EvictAll(at, retention, t.MaxRetained))
			nextPass, sincePass = at+evictEvery, 0
		}
	}
	return evicted, it.Close()
}

// EvictAll makes cold every run Evictable at now (unix ms) with retention
// (ms) and maxRetained, and returns their ids in the order evicted, then
// the ids of runs made cold by an earlier pass whose summaries it has now
// written to the index (their write had failed: see flushSummaries). The
// engine calls it on its working state and repeats the same ids on its
// other copy with Evict, which makes the first cold and drops the others'
// summaries from memory. The runs it makes cold are queued for their views
// (ColdStore.SaveViewsOnEvict), but for a run read back and made cold again
// with no event of it since, whose view is written, queued or missing
// already; Evict queues nothing, so a run is queued once, not once per copy.
// It notes the ended runs it keeps whose last event is stamped after now
// (noteAhead): the next passes measure their retention from now.
func (s *State) EvictAll(now, retention int64, maxRetained int) []string {
	ids, _ := s.EvictAllCounted(now, retention, maxRetained)
	return ids
}

// EvictAllCounted is EvictAll, and also returns how many of the runs it made cold changed since they were last cold
// (all but those read back and made cold again with no event of theirs since): what the engine counts towards its
// next snapshot, which a client's refused commands to a cold run must not make due.
func (s *State) EvictAllCounted(now, retention int64, maxRetained int) (ids []string, changed int) {
	ids = s.Evictable(now, retention, maxRetained)
	writes := s.store != nil && s.store.index
	var earlier []string
	if len(s.cold) > 0 && writes { // NB: else they stay in memory for good (a reader that writes nothing)
		earlier = make([]string, 0, len(s.cold))
		for id := range s.cold {
			earlier = append(earlier, id)
		}
		slices.Sort(earlier)
	}
	for _, id := range ids {
		// NB: a run read back for a command or an event that changed nothing of it (refused, a no-op) is what its
		// view and summary say: its view is written, queued or among the missing ones already, and encoding and
		// writing the whole run again for each such command would let a client make the daemon do so at will.
		if r := s.evict(id, writes); r != nil && !s.store.unchangedSinceReadBack(id, r.last) {
			s.store.queueView(id, r.last, r)
			changed++
		}
	}
	s.noteAhead(now)
	if err := s.flushSummaries(); err != nil {
		s.store.indexWriteFailed(len(s.cold), err)
		return ids, changed
	}
	for _, id := range earlier {
		if s.cold[id] == nil { // written now
			ids = append(ids, id)
		}
	}
	return ids, changed
}

// LoadInfo tells how Load built the state.
type LoadInfo struct {
	// SnapshotPosition is the position of the snapshot used, 0 for none.
	SnapshotPosition uint64
	// SnapshotRecords is the size of the snapshot used, in records
	// (State.SnapshotRecords), 0 for none.
	SnapshotRecords int64
	// SnapshotError is why the newest snapshot was not used (absent,
	// corrupt, undecodable); nil when it was.
	SnapshotError error
	// Replayed is the number of events folded after the snapshot.
	Replayed uint64
	// Evicted is the number of runs LoadTiered made cold (runs hot in the
	// snapshot included): what a new snapshot would no longer hold whole.
	Evicted int
	// Indexed is the number of cold runs' summaries LoadTiered wrote to
	// the index from a snapshot that listed them (their write had failed):
	// what a new snapshot would no longer list.
	Indexed int
	// IndexRebuilt, when set, is why the index of summaries was found
	// wanting (Tiering.Index) and rebuilt: it and the snapshot were
	// dropped and the state folded from position 1.
	IndexRebuilt error
}

// Load builds the state of the whole durable log: the newest valid snapshot
// plus the tail after it, or a fold from position 1 when there is no usable
// snapshot. A snapshot is an optimisation only: both paths give the same
// state, and a corrupt snapshot is reported in LoadInfo, never trusted. The
// tail is read checking the hash chain (Replay): a broken link fails the
// load. Every run the fold meets stays hot (runs cold in the snapshot stay
// cold).
func Load(l *eventlog.Log) (*State, LoadInfo, error) {
	return LoadTiered(l, Tiering{Retention: -1})
}

// LoadTiered is Load keeping hot only what t says: while the log is folded,
// every ended run past the retention by event time goes cold, so a fold
// from position 1 never holds every run; at the end, those past it at t.Now.
func LoadTiered(l *eventlog.Log, t Tiering) (*State, LoadInfo, error) {
	var info LoadInfo
	s := New()
	snap, err := l.LatestSnapshot()
	if t.NoSnapshot {
		snap, err = eventlog.Snapshot{}, errSnapshotSkipped
	}
	if err == nil {
		var decoded *State
		var records int64
		decoded, records, err = decodeSnapshot(snap.Data)
		if err == nil && decoded.Position != snap.Position {
			err = fmt.Errorf("%w: snapshot stored at %d holds state at %d", eventlog.ErrCorrupt, snap.Position,
				decoded.Position)
		}
		if err == nil {
			s, info.SnapshotPosition, info.SnapshotRecords = decoded, snap.Position, records
		}
	}
	if err != nil {
		info.SnapshotError = err
	}
	s.store = NewColdStore(l, t.Cache)
	if t.SaveViews {
		s.store.SaveViewsOnEvict()
		for id, cr := range s.cold {
			if cr.noView {
				s.store.markViewMissing(id)
			}
		}
		for _, id := range s.noViews {
			s.store.markViewMissing(id)
		}
	}
	if t.Index {
		s.store.WriteIndex()
		// A snapshot lists the cold runs whose summary was not written
		// when it was taken: their summaries go to the index now, so
		// that they leave memory.
		n := len(s.cold)
		if err := s.flushSummaries(); err != nil {
			s.store.indexWriteFailed(len(s.cold), err)
		}
		info.Indexed = n - len(s.cold)
	}
	s.noViews = nil
	if t.RefoldOnly {
		s.store.RefoldOnly()
	}
	if t.Index && info.SnapshotPosition > 0 {
		// NB: before the tail is folded, which faults in the cold runs it
		// touches from the index: a removed index is met here in O(1).
		if err := s.checkIndex(false); err != nil {
			return rebuildIndex(l, t, err)
		}
	}
	from := s.Position
	if info.Evicted, err = replay(s, l, 0, t); err != nil {
		return nil, info, err
	}
	if t.Retention >= 0 && t.Now != 0 {
		info.Evicted += len(s.EvictAll(t.Now, t.Retention.Milliseconds(), t.MaxRetained))
	}
	info.Replayed = s.Position - from
	if t.Index {
		if err := s.checkIndex(true); err != nil {
			if t.rebuilding {
				// NB: the state is the fold from position 1's, as right as
				// a rebuild makes it; the daemon starts and says so rather
				// than not start.
				info.IndexRebuilt = fmt.Errorf("still wanting after the rebuild: %w", err)
				return s, info, nil
			}
			return rebuildIndex(l, t, err)
		}
	}
	return s, info, nil
}

// rebuildIndex drops the index of summaries and the snapshot that relies
// on it, and loads the state again from position 1, which writes the
// index anew (why: the index is wanting, see checkIndex). A crash while it
// runs leaves a store without a snapshot, which folds from position 1
// again.
func rebuildIndex(l *eventlog.Log, t Tiering, why error) (*State, LoadInfo, error) {
	if err := l.DropSummaries(true); err != nil {
		return nil, LoadInfo{}, fmt.Errorf("projections: dropping the index of summaries (%v): %w", why, err)
	}
	t.NoSnapshot, t.rebuilding = true, true
	s, info, err := LoadTiered(l, t)
	if info.IndexRebuilt != nil {
		why = fmt.Errorf("%w; %v", why, info.IndexRebuilt)
	}
	info.IndexRebuilt = why
	return s, info, err
}

// newerEvent reports whether err, r's payload decoding error, says a newer build wrote r: a type this build does not
// know, or a schema version past the one it knows. Version 0, an older version with no upcaster and bytes that do not
// decode are damage.
func newerEvent(r *eventlog.Event, err error) bool {
	return errors.Is(err, events.ErrUnknownType) ||
		errors.Is(err, events.ErrUnsupportedVersion) && r.SchemaVersion > events.SchemaVersion(r.Type)
}

// ErrNewerEvent marks a record this build cannot fold because a newer build wrote it: its event type, or the schema
// version of its type, is unknown here. NB: it is not eventlog.ErrCorrupt: the record's checksum and hash chain hold,
// so it is what was written, and a backup holds the same event; the store needs a build that knows it.
var ErrNewerEvent = errors.New("projections: event of a newer build")

// NewerEventError is ErrNewerEvent for the record at Position.
type NewerEventError struct {
	Position      uint64
	Type          string
	SchemaVersion uint16
	Err           error // what the payload decoder said
}

func (e *NewerEventError) Error() string {
	return fmt.Sprintf("projections: the event at position %d (%s v%d) was written by a newer build: %v", e.Position,
		e.Type, e.SchemaVersion, e.Err)
}

func (e *NewerEventError) Unwrap() []error { return []error{ErrNewerEvent, e.Err} }
