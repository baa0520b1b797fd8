package eventlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
)

// CurrentFormat is the store format this build writes (see format.go). A
// store whose format is newer is refused by Open; an older one is opened only
// read-only or with Options.AllowOlderFormat, and is upgraded by the
// migrations package before a writer uses it.
const CurrentFormat = FormatChunkedSnapshots

// Log is the append-only event log of one crewlog store.
//
// Concurrency: all methods are safe for concurrent use. Appends are
// serialised up to the hand-off to Pebble's commit pipeline and then wait
// for their fsync concurrently, so concurrent appenders share fsyncs.
// Readers never observe an append before it is durable.
//
// Errors: after any write or sync error the log fails stop: every later
// Append returns an error wrapping ErrFailed until the store is reopened.
type Log struct {
	db   *pebble.DB
	opts Options
	dir  string
	// pebbleOpts are the options the store was opened with, defaults
	// filled in: a table built for ingestion uses them (ingest.go).
	pebbleOpts *pebble.Options
	// ingestMu serialises ingestions, which share one file name.
	ingestMu sync.Mutex

	mu       sync.Mutex // guards the fields below up to outcomesMu, and the order of hand-off to Pebble
	next     uint64     // next position to assign
	prevHash [32]byte   // hash of position next-1
	// versions caches each stream's version for the next append to it, with
	// the position of its last event staged (0: read from the index). A
	// stream is a run, so the cache is swept (sweepVersions): it holds the
	// streams recent appends touched, not every run appended to since Open.
	// versionsSwept is the entries the last sweep left.
	versions      map[string]streamVersion
	versionsSwept int
	// filterDone is closed when the filter's background build has stopped;
	// nil until the first append starts it.
	filterDone chan struct{}
	// outcomeReads counts lookups of the outcome table that reached Pebble.
	outcomeReads atomic.Int64
	failed       atomic.Pointer[error] // the write or sync error that failed the log stop (failure.go); not under mu
	failedCh     chan struct{}         // closed when failed is set
	closed       atomic.Bool           // set under mu; read without it
	// fatal is Pebble's fatal error, which fails reads too (fatal.go).
	fatal   atomic.Pointer[FatalError]
	scratch []byte
	// What an append stages, kept for the next one (append.go).
	keyScratch   []byte
	stageKeys    []string // each write's outcome key ("" without a command id)
	stageTouched map[string]uint64
	stageSeen    map[string]struct{}
	stageTally   map[string]uint64             // principal → its tally after the writes so far (tally.go)
	stageGroups  map[string]uint64             // group → its tally after the writes so far (tally.go)
	tallyGroup   func(principal string) string // SetTallyGroup's; nil: no group tallies
	stageRuns    stagedRuns

	// outcomesMu guards the fields below up to summaries: what an Outcome
	// lookup reads besides Pebble. Taken after mu, never before it.
	//
	// NB: not mu, which an append holds while Pebble holds its hand-off
	// back (a write stall, and for good once the flush it waits for
	// fails): a lookup, which reads only durable outcomes, waited for it.
	outcomesMu sync.Mutex
	// pending holds the outcome keys of the appends handed to Pebble (from
	// before the hand-off) whose sync has not returned.
	pending map[string]struct{}
	// gen counts appends handed to Pebble and format steps; absent holds
	// outcome keys an Outcome lookup found unrecorded, with the gen it saw.
	// Until the next append or step (forgetAbsent) nothing can record them,
	// so Append may skip its own lookup: a writer that looks an id up
	// before appending it pays one Get, not two.
	gen    uint64
	absent map[string]uint64
	recent *recentOutcomes // outcomes synced since Open, bounded (recent.go)
	// filter proves most new command ids unrecorded without a Pebble read
	// (outcome_filter.go); nil on a read-only log or an older format.
	filter *outcomeFilter

	// summaries is what the log keeps of its index of summaries
	// (summary_index.go).
	summaries summaryIndex

	stalls *writeStalls // Pebble's write stalls (storage_stats.go)
	// derived is the sync after the last write of derived data (derived_sync.go).
	derived derivedSync
	// wal is the first failed write or sync of a WAL file (wal_failure.go).
	wal *walFailure

	durable  atomic.Pointer[head] // last position whose append has synced
	inflight sync.WaitGroup       // appends waiting for their sync
}

// Open opens (creating if needed) the store in dir.
func Open(dir string, opts *Options) (*Log, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	wal := &walFailure{}
	logger := newPebbleLogger(o.Logger)
	po := &pebble.Options{
		FS:                 &walWatchFS{FS: o.FS, wal: wal},
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             logger,
		CacheSize:          o.CacheSize + memTableReservation(o.MemTableSize),
		MemTableSize:       o.MemTableSize,
		ReadOnly:           o.ReadOnly,
	}
	// Bloom filters make the command-id lookups every command does cheap
	// when the id is new, which is the common case.
	po.Levels[0].FilterPolicy = bloom.FilterPolicy(10)
	// NB: a data block ends before a value that would overflow it, however
	// little it holds (Pebble's default keeps adding below 90 % of the
	// target size). A reader that follows the head (the broker's feed, a
	// subscription, a wait) opens an iterator from the next position on
	// every commit; in a table holding the newest flushed events, its seek
	// loads the block holding the first key past them. With the default,
	// that block also held the snapshot written after them — megabytes,
	// too large to stay cached — and every follower's wake decompressed it
	// again (≈ 5 ms for a 30 MB snapshot). Levels below 0 inherit it.
	po.Levels[0].BlockSizeThreshold = 1
	SetCompression(po)
	stalls := newWriteStalls(o.Logger)
	po.EventListener = stalls.listener()
	flushes := &flushFailure{logger: po.Logger}
	flushes.listen(po.EventListener)
	if o.ReadOnly {
		// A read-only open is the offline tools' (verify, replay): a table that fails its checksum is damage they
		// report, as the error of the read that met it. Pebble's default is a fatal error, which made verify
		// panic on the very damage it looks for.
		po.EventListener.DataCorruption = func(info pebble.DataCorruptionInfo) { po.Logger.Errorf("%s", info) }
	}
	po.EnsureDefaults()
	db, err := pebble.Open(dir, po)
	if err != nil {
		if isLockConflict(err) {
			return nil, fmt.Errorf("%w: %s: %v", ErrLocked, dir, err)
		}
		if pebble.IsCorruptionError(err) || isTableSizeMismatch(err) {
			return nil, fmt.Errorf("eventlog: open %s: %w: %w", dir, ErrCorrupt, err)
		}
		return nil, fmt.Errorf("eventlog: open %s: %w", dir, err)
	}
	l := &Log{
		db:         db,
		opts:       o,
		dir:        dir,
		pebbleOpts: po,
		stalls:     stalls,
		versions:   make(map[string]streamVersion),
		pending:    make(map[string]struct{}),
		failedCh:   make(chan struct{}),
		derived:    derivedSync{turn: make(chan struct{}, 1)},
		absent:     make(map[string]uint64),
		recent:     newRecentOutcomes(o.RecentOutcomes, o.RecentOutcomeBytes),
		wal:        wal,
	}
	wal.log.Store(l)
	logger.log.Store(l)
	format, err := l.recover()
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	if !o.ReadOnly && format == CurrentFormat {
		l.filter = newOutcomeFilter()
	}
	if !o.ReadOnly {
		if err := l.removeStaleIngestFile(); err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("eventlog: %w", err)
		}
	}
	// NB: from here on, not before: a flush that fails while Open waits for it (the recovered state's) is retried
	// until it succeeds, and the log it opens then has lost nothing.
	flushes.log.Store(l)
	return l, nil
}

// memTableReservation is what Pebble takes out of the block cache for its
// memtables in steady state: the mutable one and the one it keeps for
// recycling (more while flushes queue up).
//
// NB: Pebble charges memtables to the block cache. A cache of CacheSize
// next to memtables of MemTableSize ≥ CacheSize holds no block at all:
// every read, the command-id lookup of every command included, then reads,
// checksums and decompresses its blocks again.
func memTableReservation(memTableSize uint64) int64 { return 2 * int64(memTableSize) }

// recover checks the format and loads the head; it returns the format.
func (l *Log) recover() (uint32, error) {
	format, err := l.getFormat()
	switch {
	case errors.Is(err, ErrNotFound):
		if empty, err := l.isEmpty(); err != nil {
			return 0, err
		} else if !empty {
			return 0, corruptf(0, keyFormat, "missing format marker in a non-empty store")
		}
		if l.opts.ReadOnly {
			return 0, fmt.Errorf("eventlog: %w: the store is empty and was opened read-only", ErrNotFound)
		}
		b := l.db.NewBatch()
		_ = b.Set(keyFormat, encodeFormat(CurrentFormat), nil)
		if err := l.commitSynced(b); err != nil {
			return 0, fmt.Errorf("eventlog: write format: %w", err)
		}
		format = CurrentFormat
	case err != nil:
		return 0, err
	}
	if err := checkFormat(format, &l.opts); err != nil {
		return 0, err
	}

	h, err := l.loadHead()
	if err != nil {
		return 0, err
	}
	l.next = h.Position + 1
	l.prevHash = h.Hash
	l.durable.Store(&h)
	if !l.opts.ReadOnly && h.Position > 0 {
		// Whatever Pebble replayed from the WAL is now served as durable;
		// flushing makes that true even if it was never fsynced before a
		// process crash.
		if err := l.db.Flush(); err != nil {
			return 0, fmt.Errorf("eventlog: flush recovered state: %w", err)
		}
	}
	return format, nil
}

// Format returns the store's format version.
func (l *Log) Format() (uint32, error) {
	if err := l.readable(); err != nil {
		return 0, err
	}
	return l.getFormat()
}

func (l *Log) getFormat() (uint32, error) {
	v, closer, err := l.db.Get(keyFormat)
	if err != nil {
		if isNotFound(err) {
			return 0, ErrNotFound
		}
		return 0, tableDamage(fmt.Errorf("eventlog: read format: %w", err))
	}
	defer closer.Close()
	return decodeFormat(v)
}

func (l *Log) isEmpty() (bool, error) {
	it, err := l.db.NewIter(nil)
	if err != nil {
		return false, orErr(err, nil)
	}
	empty := !it.First()
	return empty, orErr(it.Close(), nil)
}

// loadHead reads the persisted head and checks it against the records: the
// record at the head exists with the head's hash, and none follows it.
func (l *Log) loadHead() (head, error) {
	v, closer, err := l.db.Get(keyHead)
	var h head
	switch {
	case isNotFound(err):
		// No head: no event may exist.
	case err != nil:
		return head{}, tableDamage(fmt.Errorf("eventlog: read head: %w", err))
	default:
		h, err = decodeHead(v)
		closer.Close()
		if err != nil {
			return head{}, err
		}
	}
	if h.Position > 0 {
		rec, err := l.rawRecord(h.Position)
		if errors.Is(err, ErrNotFound) {
			return head{}, corruptf(h.Position, keyHead, "the head names position %d, which holds no record", h.Position)
		}
		if err != nil {
			return head{}, err
		}
		if err := checkRecord(rec); err != nil {
			return head{}, &CorruptError{Position: h.Position, Key: keyString(eventKey(h.Position)), Reason: err.Error()}
		}
		if recordHash(rec) != h.Hash {
			return head{}, corruptf(h.Position, keyHead, "head hash does not match the record at position %d", h.Position)
		}
	}
	// NB: a seek, not a read of h.Position+1: a record further on is as
	// foreign to the log, and the appends would overwrite it unseen.
	it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: eventKey(h.Position + 1),
		UpperBound: []byte{prefixEvent + 1}})
	if err != nil {
		return head{}, tableDamage(fmt.Errorf("eventlog: read past the head: %w", err))
	}
	defer it.Close()
	if it.First() {
		k := it.Key()
		pos := h.Position + 1
		if len(k) == 9 {
			pos = binary.BigEndian.Uint64(k[1:])
		}
		return head{}, corruptf(pos, k, "a record exists beyond the head at position %d", h.Position)
	}
	if err := it.Error(); err != nil {
		return head{}, tableDamage(fmt.Errorf("eventlog: read past the head: %w", err))
	}
	return h, nil
}

// rawRecord returns a copy of the stored value at pos.
func (l *Log) rawRecord(pos uint64) ([]byte, error) {
	k := eventKey(pos)
	v, closer, err := l.db.Get(k)
	if err != nil {
		if isNotFound(err) {
			return nil, fmt.Errorf("%w: position %d", ErrNotFound, pos)
		}
		return nil, tableDamage(fmt.Errorf("eventlog: read %s: %w", keyString(k), err))
	}
	defer closer.Close()
	return append([]byte(nil), v...), nil
}

// recordBelowHead is rawRecord for a position at or below the durable head,
// where a missing record is a gap in the log: damage, as the iterator says.
func (l *Log) recordBelowHead(pos uint64) ([]byte, error) {
	rec, err := l.rawRecord(pos)
	if errors.Is(err, ErrNotFound) {
		return nil, corruptf(pos, eventKey(pos), "missing record at position %d (gap)", pos)
	}
	return rec, err
}

// Head returns the last durable position and its hash (0 and the zero hash
// for an empty log).
func (l *Log) Head() (position uint64, hash [32]byte) {
	h := l.durable.Load()
	return h.Position, h.Hash
}

// Event reads the durable event at pos. A pos of 0 or past the durable head
// is ErrNotFound; a record missing at or below it is a *CorruptError (a
// gap).
func (l *Log) Event(pos uint64) (Event, error) {
	if err := l.readable(); err != nil {
		return Event{}, err
	}
	if pos == 0 || pos > l.durable.Load().Position {
		return Event{}, fmt.Errorf("%w: position %d", ErrNotFound, pos)
	}
	v, err := l.recordBelowHead(pos)
	if err != nil {
		return Event{}, err
	}
	var ev Event
	if err := DecodeRecord(v, &ev); err != nil {
		return Event{}, &CorruptError{Position: pos, Key: keyString(eventKey(pos)), Reason: err.Error()}
	}
	if ev.Position != pos {
		return Event{}, corruptf(pos, eventKey(pos), "record says position %d", ev.Position)
	}
	return ev, nil
}

// Close waits for in-flight appends and for the sync after the last write of
// derived data (derived_sync.go), and closes the store. Every iterator
// must be closed first, and no read may run concurrently with Close.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed.Load() {
		l.mu.Unlock()
		return ErrClosed
	}
	l.closed.Store(true)
	filterDone := l.filterDone
	l.mu.Unlock()
	l.inflight.Wait()
	if filterDone != nil {
		<-filterDone
	}
	derr := l.awaitDerived()
	if err := l.db.Close(); err != nil {
		return err
	}
	return derr
}

// readable guards reads. Close must not race with reads or open iterators
// (it waits only for appends), so an atomic check is enough. After Pebble's
// fatal error nothing is read (fatal.go).
func (l *Log) readable() error {
	if l.closed.Load() {
		return ErrClosed
	}
	return l.fatalRefusal()
}

func isNotFound(err error) bool { return errors.Is(err, pebble.ErrNotFound) }
