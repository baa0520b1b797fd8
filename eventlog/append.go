package eventlog

import (
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// Expected stream versions for Expectation.Version. Any other value v > 0
// demands that the stream be exactly at version v.
const (
	Any      int64 = -1 // no check
	NoStream int64 = 0  // the stream must not exist yet
)

// Expectation is an optimistic-concurrency check on one stream, evaluated
// after the writes before it in the same append.
type Expectation struct {
	Stream  string
	Version int64
}

// Write is one decided unit of an append: a command's events and, when
// CommandID is set, its outcome for the outcome table under (Principal,
// CommandID). Its events are stamped with CommandID (the principal is not
// stamped: the caller can tell it from the events' envelope, see
// VerifyOptions.Principal). A rejection is a Write with Code set (and
// possibly events, e.g. delegate.requested + delegate.rejected); a write
// with neither events nor a command id is invalid.
type Write struct {
	// Principal is whose CommandID it is, in the caller's canonical
	// encoding; opaque to the log, at most MaxPrincipalLen bytes.
	Principal   string
	CommandID   string
	Expected    []Expectation
	Events      []Event
	Code        string // rejection code; "" = accepted
	Reason      string
	Result      []byte // opaque response recorded with the outcome
	Fingerprint []byte // opaque digest of the request, at most MaxFingerprintLen bytes
}

// Limits of the outcome key and value fields a Write adds to the log's
// other limits (MaxIDLen).
const (
	MaxPrincipalLen   = 1024
	MaxFingerprintLen = 64
)

// Append commits the writes atomically in one synced Pebble batch and
// returns the position of the first event (0 if no write has events).
//
// Append assigns Position, StreamVersion and Hash in place in every event of
// ws, in order: positions are gapless across writes and appends. It returns
// only after the batch is durable. An error before the hand-off to Pebble
// (invalid input, *ConflictError, ErrDuplicateCommand) leaves no trace and no
// gap. An I/O error fails the log (see ErrFailed); the failed append is then
// either wholly present or wholly absent after reopening, never partial —
// which is why commands carry ids.
func (l *Log) Append(ws ...Write) (first uint64, err error) {
	return l.appendBatch(ws, nil, nil, true)
}

// appendBatch is Append with three additions: for format steps
// (upgrade.go) base, when set, is a batch already holding writes that must
// commit atomically with ws, and extra adds keys to the batch after ws's;
// for a copy of a durable log (AppendFromUnsynced) sync false leaves the
// batch to a later sync.
func (l *Log) appendBatch(ws []Write, base *pebble.Batch, extra func(*pebble.Batch), sync bool) (
	first uint64, err error) {
	s, err := l.stageBatch(ws, base, extra, sync)
	if err != nil {
		return 0, err
	}
	return s.Wait()
}

// Staged is an append handed to Pebble whose sync has not been awaited:
// the first half of Append (Stage), for a caller that prepares the next
// append while this one syncs. Until Wait returns, readers do not see it.
type Staged struct {
	l        *Log
	b        *pebble.Batch
	first    uint64
	recorded []stagedOutcome
	last     head
}

// Stage does what Append does up to the hand-off to Pebble's commit
// pipeline and returns without waiting for the sync: ws are validated and
// get their positions, stream versions and hashes in place, in the order of
// the Stage (and Append) calls, so a later Stage is ordered after this one
// in the log and in the WAL. Its errors are Append's. The caller must call
// Wait exactly once on a successful Stage; Close waits for that.
//
// Nothing of a staged append is visible to readers (Read, Event, Outcome,
// Head) before its Wait returns successfully: Outcome reports its command
// ids as not found, and Append refuses them as duplicates, meanwhile.
func (l *Log) Stage(ws ...Write) (*Staged, error) {
	return l.stageBatch(ws, nil, nil, true)
}

func (l *Log) stageBatch(ws []Write, base *pebble.Batch, extra func(*pebble.Batch), sync bool) (*Staged, error) {
	if l.opts.ReadOnly {
		return nil, ErrReadOnly
	}
	if sync {
		if l.opts.beforeSyncedHandOff != nil {
			l.opts.beforeSyncedHandOff()
		}
		// NB: the lock of the writes made without a sync from the check of the pending sync to the hand-off, so that
		// none reaches Pebble between them (derived_sync.go); an unsynced append holds it already (appendUnsynced).
		if err := l.lockDerived(); err != nil {
			return nil, err
		}
		defer l.unlockDerived()
		if err := l.awaitDerivedLocked(); err != nil {
			return nil, err
		}
	}
	b, first, recorded, last, err := l.stage(ws, base, extra, sync)
	if err != nil {
		return nil, err
	}
	return &Staged{l: l, b: b, first: first, recorded: recorded, last: last}, nil
}

// First is the position of the staged append's first event (0 if no write
// has events).
func (s *Staged) First() uint64 { return s.first }

// Wait waits for the staged append's WAL sync and then makes it visible to
// readers; it returns Append's result. Syncs complete in WAL order, so a
// successful Wait implies that every append staged before it is durable
// too; after a failed sync every later one fails (the log fails stop).
// Waits may run on another goroutine than the Stage, one each.
func (s *Staged) Wait() (first uint64, err error) {
	l := s.l
	defer l.inflight.Done()
	if l.opts.BeforeSync != nil {
		l.opts.BeforeSync()
	}
	// The sync is awaited outside the mutex so that later appends can join
	// the same WAL fsync (Pebble's commit pipeline groups them).
	serr := syncOutcome(s.b.SyncWait())
	s.b.Close()
	if serr != nil {
		l.fail(serr)
	}
	// NB: outcomesMu, not l.mu, which a later append holds while Pebble holds it back (log.go): this append,
	// durable, is answered.
	l.outcomesMu.Lock()
	for i := range s.recorded {
		if serr != nil {
			// NB: a failed append's outcomes stay pending for good: Pebble
			// holds them in its memtable, and a lookup that reached it
			// would serve an outcome that was never synced.
			break
		}
		r := &s.recorded[i]
		delete(l.pending, r.key)
		// In the same critical section as leaving pending, so that a
		// lookup finds the outcome in one place or the other.
		l.recent.add(r.key, &r.outcome)
	}
	l.outcomesMu.Unlock()
	if serr != nil {
		return 0, fmt.Errorf("%w: sync: %v", ErrFailed, serr)
	}
	if s.last.Position > 0 {
		l.advanceDurable(s.last)
	}
	return s.first, nil
}

// stage validates ws, assigns positions and versions, encodes the batch and
// hands it to Pebble, all under l.mu so that hand-off order is position
// order. On success the caller owns one l.inflight count. Without sync the
// batch is applied and written to the WAL unsynced: the Staged's Wait then
// has no sync to await.
func (l *Log) stage(ws []Write, base *pebble.Batch, extra func(*pebble.Batch), sync bool) (
	b *pebble.Batch, first uint64, recorded []stagedOutcome, last head, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.refusal(); err != nil {
		return nil, 0, nil, head{}, err
	}
	if len(ws) == 0 {
		return nil, 0, nil, head{}, fmt.Errorf("%w: no writes", ErrInvalid)
	}

	// Validate everything before assigning anything, so that a refused
	// append leaves no trace.
	if err := l.validateWrites(ws); err != nil {
		return nil, 0, nil, head{}, err
	}

	// Assign, encode and chain. Sizing the batch up front saves its
	// buffer's regrowth copies.
	size, outcomes := 64, 0
	for i := range ws {
		w := &ws[i]
		for j := range w.Events {
			e := &w.Events[j]
			size += 2*len(e.Stream) + len(e.Type) + len(e.Payload) + len(e.CommandID) + len(e.CausationID) +
				len(e.CorrelationID) + len(e.ActorRole) + len(e.ActorTask) + 128
		}
		if w.CommandID != "" {
			// The outcome's key and value, and the batch's framing of them.
			size += 2*(len(w.Principal)+len(w.CommandID)) + len(w.Code) + len(w.Reason) + len(w.Result) +
				len(w.Fingerprint) + 64
			outcomes++
		}
	}
	recorded = make([]stagedOutcome, 0, outcomes)
	if b = base; b == nil {
		b = l.db.NewBatchWithSize(size)
	}
	if err := l.stageTallies(b, ws); err != nil {
		if base == nil {
			_ = b.Close()
		}
		return nil, 0, nil, head{}, err
	}
	pos, prev := l.next, l.prevHash
	first = 0
	key := l.keyScratch[:0]
	runs := l.stageRuns.reset()
	for i := range ws {
		w := &ws[i]
		wfirst := uint64(0)
		for j := range w.Events {
			e := &w.Events[j]
			e.Position = pos
			e.CommandID = w.CommandID
			sv := l.versions[e.Stream]
			sv.version++
			sv.last = pos
			l.versions[e.Stream] = sv
			e.StreamVersion = sv.version
			l.scratch = appendRecord(l.scratch[:0], &prev, e)
			prev = e.Hash
			key = appendEventKey(key[:0], pos)
			_ = b.Set(key, l.scratch, nil)
			if e.StreamVersion == 1 {
				// The stream catalog entry (format 2) is written with the
				// stream's first event, so it is never behind the log.
				_ = b.Set(catalogKey(e.Stream), encodeCatalog(pos, e.Time), nil)
			}
			runs.add(e.Stream, e.StreamVersion, pos)
			if wfirst == 0 {
				wfirst = pos
			}
			pos++
		}
		if first == 0 {
			first = wfirst
		}
		if w.CommandID != "" {
			o := Outcome{First: wfirst, Count: uint64(len(w.Events)), Code: w.Code, Reason: w.Reason, Result: w.Result,
				Fingerprint: w.Fingerprint}
			recorded = append(recorded, stagedOutcome{key: l.stageKeys[i], outcome: o})
		}
	}
	// NB: the outcomes after all the events, not each after its write's:
	// Pebble's memtable inserts a batch's keys in batch order and starts
	// each search from where the previous insert was, so the events, whose
	// keys follow one another, cost little as long as no outcome, whose key
	// lies elsewhere, comes between them. The batch commits atomically
	// whatever its order.
	for i := range recorded {
		r := &recorded[i]
		l.scratch = r.outcome.appendSealed(l.scratch[:0], outcomeFields)
		key = append(key[:0], r.key...)
		_ = b.Set(key, l.scratch, nil)
	}
	for _, r := range runs.runs {
		key = appendStreamKey(key[:0], r.stream, r.first)
		l.scratch = appendIndexValue(l.scratch[:0], r.positions)
		_ = b.Set(key, l.scratch, nil)
	}
	l.keyScratch = key[:0]
	if pos > l.next {
		last = head{Position: pos - 1, Hash: prev}
		_ = b.Set(keyHead, last.encode(), nil)
	}
	if extra != nil {
		extra(b)
	}

	// NB: the outcomes are pending from before the hand-off, not after it: Pebble shows the batch to readers once
	// it is applied, before its sync, and Outcome, which does not take l.mu, reads Pebble for a key not pending.
	l.outcomesMu.Lock()
	for i := range recorded {
		l.pending[recorded[i].key] = struct{}{}
		l.filter.add(l.filter.hashString(recorded[i].key))
	}
	l.gen++
	clear(l.absent)
	l.outcomesMu.Unlock()
	if err := l.apply(b, sync); err != nil {
		// Nothing was handed to the WAL; still, a Pebble write error means
		// the store is in doubt: fail stop. Its outcomes stay pending for
		// good, as a failed sync's do (Wait).
		// The batch is not closed: Pebble may still reference it, and the log
		// is dead anyway.
		l.fail(err)
		l.rollbackVersions(ws)
		return nil, 0, nil, head{}, fmt.Errorf("%w: apply: %v", ErrFailed, err)
	}
	if l.opts.afterHandOff != nil {
		l.opts.afterHandOff()
	}
	l.next, l.prevHash = pos, prev
	if l.filter != nil && l.filterDone == nil {
		// NB: the first append starts the filter's build, not Open: a
		// reader never pays for it, and a daemon's start-up (its state
		// loaded from the log before it appends) does not share the
		// machine with it.
		l.filterDone = make(chan struct{})
		go l.buildOutcomeFilter()
	}
	l.sweepVersions()
	l.inflight.Add(1)
	return b, first, recorded, last, nil
}

// apply hands b to Pebble's commit pipeline: synced, returning before the
// sync (Staged.Wait awaits it), or unsynced, written to the WAL in order
// with every other batch and made durable by the next synced one.
func (l *Log) apply(b *pebble.Batch, sync bool) error {
	if sync {
		return l.db.ApplyNoSyncWait(b, pebble.Sync)
	}
	return l.db.Apply(b, pebble.NoSync)
}

// validateWrites refuses ws if Append would: invalid input, a duplicate
// command id, a failed expectation. It assigns nothing. Called with l.mu
// held.
//
// It leaves each write's outcome key in l.stageKeys, for stage.
func (l *Log) validateWrites(ws []Write) error {
	touched := reuseMap(&l.stageTouched) // stream → version after the writes so far
	seen := reuseMap(&l.stageSeen)
	l.stageKeys = slices.Grow(l.stageKeys[:0], len(ws))[:len(ws)]
	for i := range ws {
		w := &ws[i]
		if len(w.Events) == 0 && w.CommandID == "" {
			return fmt.Errorf("%w: write %d has neither events nor a command id", ErrInvalid, i)
		}
		switch {
		case len(w.CommandID) > MaxIDLen:
			return fmt.Errorf("%w: command id of %d bytes exceeds %d", ErrInvalid, len(w.CommandID), MaxIDLen)
		case len(w.Principal) > MaxPrincipalLen:
			return fmt.Errorf("%w: principal of %d bytes exceeds %d", ErrInvalid, len(w.Principal), MaxPrincipalLen)
		case len(w.Fingerprint) > MaxFingerprintLen:
			return fmt.Errorf("%w: fingerprint of %d bytes exceeds %d", ErrInvalid, len(w.Fingerprint), MaxFingerprintLen)
		}
		l.stageKeys[i] = ""
		if w.CommandID != "" {
			l.keyScratch = appendOutcomeKey(l.keyScratch[:0], w.Principal, w.CommandID)
			l.stageKeys[i] = string(l.keyScratch)
			if err := l.checkNewCommand(l.stageKeys[i], w.CommandID, seen); err != nil {
				return err
			}
		}
		for _, x := range w.Expected {
			v, err := l.streamVersion(x.Stream, touched)
			if err != nil {
				return err
			}
			if x.Version != Any && (x.Version < 0 || uint64(x.Version) != v) {
				return &ConflictError{Stream: x.Stream, Expected: x.Version, Actual: v}
			}
		}
		for j := range w.Events {
			e := &w.Events[j]
			if err := e.validate(l.opts.MaxPayloadBytes); err != nil {
				return fmt.Errorf("write %d event %d: %w", i, j, err)
			}
			if e.CommandID != "" && e.CommandID != w.CommandID {
				return fmt.Errorf("%w: write %d event %d carries command id %q, the write %q",
					ErrInvalid, i, j, e.CommandID, w.CommandID)
			}
			v, err := l.streamVersion(e.Stream, touched)
			if err != nil {
				return err
			}
			touched[e.Stream] = v + 1
		}
	}
	return nil
}

// reuseMap empties the map *m and returns it, making it on first use; the
// log keeps the maps an append uses from one append to the next (under
// l.mu). A map that an unusually large append grew is dropped instead, so
// that clearing it does not cost every later append.
func reuseMap[V any](m *map[string]V) map[string]V {
	if *m == nil || len(*m) > maxReusedEntries {
		*m = make(map[string]V)
	} else {
		clear(*m)
	}
	return *m
}

// maxReusedEntries bounds the scratch maps and stream runs an append keeps.
const maxReusedEntries = 1024

// stagedOutcome is an outcome handed to Pebble, under its key.
type stagedOutcome struct {
	key     string
	outcome Outcome
}

// rollbackVersions undoes the version increments of a batch Pebble refused.
func (l *Log) rollbackVersions(ws []Write) {
	for i := range ws {
		for j := range ws[i].Events {
			sv := l.versions[ws[i].Events[j].Stream]
			sv.version--
			l.versions[ws[i].Events[j].Stream] = sv
		}
	}
}

// checkNewCommand refuses a principal's command id, under its outcome key,
// that is recorded, pending, or repeated within the same append.
func (l *Log) checkNewCommand(key, id string, seen map[string]struct{}) error {
	if _, dup := seen[key]; dup {
		return fmt.Errorf("%w: %q appears twice in one append", ErrDuplicateCommand, id)
	}
	seen[key] = struct{}{}
	h := l.filter.hashString(key)
	l.outcomesMu.Lock()
	_, pending := l.pending[key]
	recent := l.recent.contains(key)
	absent := l.filter.provesAbsent(h)
	g, looked := l.absent[key]
	looked = looked && g == l.gen // looked up since the last append: still unrecorded
	l.outcomesMu.Unlock()
	if pending || recent {
		return fmt.Errorf("%w: %q", ErrDuplicateCommand, id)
	}
	if absent || looked {
		return nil
	}
	_, found, err := l.lookupOutcome([]byte(key))
	if err != nil {
		return err
	}
	if found {
		return fmt.Errorf("%w: %q", ErrDuplicateCommand, id)
	}
	return nil
}

// streamVersion is the version of stream after the writes staged so far.
// The per-stream cache is filled lazily from the index, so opening a log
// costs nothing per stream.
func (l *Log) streamVersion(stream string, touched map[string]uint64) (uint64, error) {
	if v, ok := touched[stream]; ok {
		return v, nil
	}
	if sv, ok := l.versions[stream]; ok {
		return sv.version, nil
	}
	v, err := l.lastIndexedVersion(stream)
	if err != nil {
		return 0, err
	}
	l.versions[stream] = streamVersion{version: v}
	return v, nil
}

// streamVersion is a stream's entry in Log.versions: its version, and the position of its last event an append
// staged (0 when the version was read from the index).
type streamVersion struct {
	version uint64
	last    uint64
}

// maxCachedVersions is the entries of Log.versions below which it is not swept, and the positions behind the
// durable head from which a stream's last event no longer keeps its entry through a sweep (fewer behind, it does).
const maxCachedVersions = 4096

// sweepVersions drops the cached versions of the streams with no event among the last maxCachedVersions durable
// positions, whenever the cache has doubled since the last sweep (from maxCachedVersions), with l.mu held:
// amortised over the appends to new streams that grew it. A sweep leaves at most maxCachedVersions streams (one
// event each, at least) and those with an event not yet durable, so the cache holds about twice that however many
// streams (runs) were ever appended to; a run still worked on keeps its entry, one that ended leaves it at a sweep.
// A dropped stream's next append reads its version from the index (one seek). NB: an entry whose last event is
// staged but not yet durable is never dropped: Pebble may not show that event to the index's reader yet, which
// would hand out its version again.
func (l *Log) sweepVersions() {
	if len(l.versions) < 2*max(l.versionsSwept, maxCachedVersions) {
		return
	}
	durable := l.durable.Load().Position
	for stream, sv := range l.versions {
		if sv.last+maxCachedVersions <= durable {
			delete(l.versions, stream)
		}
	}
	l.versionsSwept = len(l.versions)
}

// lastIndexedVersion seeks to the stream's last index entry.
func (l *Log) lastIndexedVersion(stream string) (uint64, error) {
	lower := appendStreamPrefix(nil, stream)
	it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixUpper(lower)})
	if err != nil {
		return 0, fmt.Errorf("eventlog: %w", err)
	}
	var v uint64
	if it.Last() {
		var val []byte
		if val, err = it.ValueAndErr(); err == nil {
			v, err = lastVersionOf(it.Key(), val)
		}
	}
	if cerr := it.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("eventlog: %w", cerr)
	}
	return v, err
}

// advanceDurable moves the durable head forward to h if it is ahead.
// Syncs complete in WAL order, so a synced batch implies every earlier one
// is synced too, even if its appender has not woken yet.
func (l *Log) advanceDurable(h head) {
	for {
		cur := l.durable.Load()
		if cur.Position >= h.Position {
			return
		}
		if l.durable.CompareAndSwap(cur, &h) {
			return
		}
	}
}
