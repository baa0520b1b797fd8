package eventlog

import (
	"encoding/binary"
	"hash/maphash"
	"io"
	"strings"
	"unsafe"

	"github.com/cockroachdb/pebble/v2"
)

// VerifyReport summarises a successful Verify.
type VerifyReport struct {
	Head      uint64
	HeadHash  [32]byte
	Streams   int
	Commands  int
	Snapshots int
	Views     int // stream views (view.go)
	Tallies   int // principals' and groups' tallies of outcomes with no event (tally.go)
	Summaries int // versions of stream summaries (summary.go)
}

// VerifyOptions tune Verify; nil means defaults.
type VerifyOptions struct {
	// Progress, when set, is called now and then with the number of events
	// checked so far and the durable head.
	Progress func(done, total uint64)
	// Visit, when set, is called with each record in position order, once
	// its checksum, position, chain link and stream version have been
	// checked, so a caller that also folds the log reads it once, not
	// twice. NB: as with ReadTransient, ev, its strings and its Payload are
	// valid only during the call (they alias the storage engine's memory,
	// so the walk copies no record): a caller copies what it keeps. An
	// error from Visit stops Verify and is returned unwrapped.
	Visit func(ev *Event) error
	// Principal, when set, appends to dst the principal (in the encoding
	// the writer used for Write.Principal) whose command wrote ev; Verify
	// then checks that every outcome's events name its principal as well as
	// its command id. Without it only the command id is checked: the log
	// does not interpret envelopes.
	Principal func(dst []byte, ev *Event) []byte
}

// Verify walks the whole store and makes, in order, every check the
// package doc lists under "Verify".
//
// The first problem is returned as a *CorruptError (wrapping ErrCorrupt)
// naming the first bad position when the damage is in a record.
//
// Verify reads a consistent Pebble snapshot, so it may run while appends
// continue; it checks the log up to the durable head at its start.
//
// Damage is a *CorruptError and only damage is (a block of a table that
// fails its checksum included, named by its table): a read that fails (an
// I/O error) is returned as it came, so a caller can tell a store it could
// not check from a damaged one.
func (l *Log) Verify(opts *VerifyOptions) (VerifyReport, error) {
	rep, err := l.verify(opts)
	return rep, tableDamage(err)
}

func (l *Log) verify(opts *VerifyOptions) (VerifyReport, error) {
	var rep VerifyReport
	if err := l.readable(); err != nil {
		return rep, err
	}
	var (
		progress  func(done, total uint64)
		visit     func(ev *Event) error
		principal func(dst []byte, ev *Event) []byte
	)
	if opts != nil {
		progress, visit, principal = opts.Progress, opts.Visit, opts.Principal
	}
	snap := l.db.NewSnapshot()
	defer snap.Close()
	var format uint32

	if v, closer, err := snap.Get(keyFormat); err != nil {
		return rep, orErr(err, nil)
	} else {
		f, err := decodeFormat(v)
		closer.Close()
		if err != nil {
			return rep, err
		}
		if f > CurrentFormat {
			return rep, &FormatError{Store: f, Supported: CurrentFormat}
		}
		format = f
	}

	// Storage head: the persisted head as of the snapshot.
	var h head
	if v, closer, err := snap.Get(keyHead); err == nil {
		h, err = decodeHead(v)
		closer.Close()
		if err != nil {
			return rep, err
		}
	} else if !isNotFound(err) {
		return rep, orErr(err, nil)
	}

	seed := maphash.MakeSeed()
	ch := &commandHasher{seed: seed, principal: principal}
	// The outcome table is read on a goroutine of its own while the walk
	// runs (verify_outcomes.go); it is consulted only after the records,
	// the index and the catalog passed, so the first problem reported is
	// the one a single loop would report.
	pre := scanOutcomes(snap, h.Position, &commandHasher{seed: seed, principal: principal})
	defer pre.stop()
	streams, cmds, err := verifyRecords(snap, h, ch, progress, visit)
	if err != nil {
		return rep, err
	}
	if err := verifyIndex(snap, streams); err != nil {
		return rep, err
	}
	if format >= FormatStreamCatalog {
		if err := verifyCatalog(snap, streams); err != nil {
			return rep, err
		}
	}
	n, spans, err := pre.verify(cmds, func() (int, []outcomeSpan, error) {
		return verifyCommands(snap, h.Position, ch, cmds)
	})
	if err != nil {
		return rep, err
	}
	legacy, err := verifyLegacyCommands(snap, h.Position, format, ch, cmds, &spans)
	if err != nil {
		return rep, err
	}
	n += legacy
	if err := verifyCovered(snap, cmds, spans, ch); err != nil {
		return rep, err
	}
	s, err := verifySnapshots(snap, h.Position)
	if err != nil {
		return rep, err
	}
	views, err := verifyViews(snap, streams)
	if err != nil {
		return rep, err
	}
	sums, err := verifySummaries(snap, streams)
	if err != nil {
		return rep, err
	}
	tallies, err := verifyTallies(snap, pre.eventless)
	if err != nil {
		return rep, err
	}
	// NB: the copier resumes after the sequence it reads here: a damaged one would skip groups or apply them twice.
	if _, err := readSource(snap); err != nil {
		return rep, err
	}
	rep = VerifyReport{Head: h.Position, HeadHash: h.Hash, Streams: len(streams), Commands: n, Snapshots: s,
		Views: views, Summaries: sums, Tallies: tallies}
	return rep, nil
}

// commandHasher hashes what an outcome and the records it points at must
// agree on: the command id and, when the caller can tell it from a record,
// the principal. It is used by one goroutine.
type commandHasher struct {
	seed      maphash.Seed
	principal func(dst []byte, ev *Event) []byte
	buf       []byte // the last record's principal, reused
}

// ofRecord hashes a record's (principal, command id), or only its command
// id when principals are not checked.
func (ch *commandHasher) ofRecord(ev *Event) uint64 {
	if ch.principal == nil || ev.CommandID == "" {
		return ch.of("", ev.CommandID)
	}
	ch.buf = ch.principal(ch.buf[:0], ev)
	// NB: of only hashes the principal, so it may alias the reused buffer.
	return ch.of(unsafe.String(unsafe.SliceData(ch.buf), len(ch.buf)), ev.CommandID)
}

// principalOf is the principal whose command wrote ev, as a string of its
// own.
func (ch *commandHasher) principalOf(ev *Event) string {
	return string(ch.principal(nil, ev))
}

// ofOutcome hashes an outcome's (principal, command id) the way ofRecord
// hashes its records.
func (ch *commandHasher) ofOutcome(o *Outcome) uint64 {
	if ch.principal == nil || o.CommandID == "" {
		return ch.of("", o.CommandID)
	}
	return ch.of(o.Principal, o.CommandID)
}

func (ch *commandHasher) of(principal, id string) uint64 {
	var h maphash.Hash
	h.SetSeed(ch.seed)
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(principal)))])
	h.WriteString(principal)
	h.WriteString(id)
	return h.Sum64()
}

// verifyRecords checks every record and the head, and returns, per stream,
// the positions of its versions 1..n, and per position (from 1) the hash of
// its principal and command id (commandHasher), which verifyCommands
// compares outcomes with.
func verifyRecords(snap *pebble.Snapshot, h head, ch *commandHasher, progress func(done, total uint64),
	visit func(*Event) error) (streamVersions, []uint64, error) {
	it, err := prefixIter(snap, prefixEvent)
	if err != nil {
		return nil, nil, orErr(err, nil)
	}
	defer it.Close()
	streams := make(streamVersions)
	// NB: the head is not trusted yet, so it only hints the size.
	cmds := make([]uint64, 0, min(h.Position, 1<<20))
	var prev [32]byte
	want := uint64(1)
	var ev Event
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != 9 {
			return nil, nil, corruptf(want, k, "malformed event key")
		}
		pos := binary.BigEndian.Uint64(k[1:])
		switch {
		case want > h.Position:
			// NB: every record up to the head was met, so this one is not
			// missing its predecessors: it lies past the head, whatever it
			// holds (Open refuses it too).
			return nil, nil, corruptf(pos, k, "record at %d is beyond the head %d", pos, h.Position)
		case pos != want:
			return nil, nil, corruptf(want, eventKey(want), "missing record (next stored position is %d)", pos)
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, nil, orErr(err, nil)
		}
		// NB: ev aliases v, valid until it.Next: nothing below keeps
		// its strings without a copy.
		if err := decodeRecordTransient(v, &ev); err != nil {
			return nil, nil, &CorruptError{Position: pos, Key: keyString(k), Reason: err.Error()}
		}
		if ev.Position != pos {
			return nil, nil, corruptf(pos, k, "record says position %d", ev.Position)
		}
		if chainHash(&prev, recordBody(v)) != ev.Hash {
			return nil, nil, corruptf(pos, k, "hash chain broken")
		}
		vers := streams[ev.Stream]
		if vers == nil {
			vers = new(versions)
			streams[strings.Clone(ev.Stream)] = vers
		}
		if ev.StreamVersion != uint64(len(vers.pos))+1 {
			return nil, nil, corruptf(pos, k, "stream %q version %d follows version %d", ev.Stream, ev.StreamVersion,
				len(vers.pos))
		}
		vers.pos = append(vers.pos, pos)
		cmds = append(cmds, ch.ofRecord(&ev))
		prev = ev.Hash
		if visit != nil {
			if err := visit(&ev); err != nil {
				return nil, nil, err
			}
		}
		want++
		if progress != nil && want%65536 == 0 {
			progress(want-1, h.Position)
		}
	}
	if err := it.Error(); err != nil {
		return nil, nil, orErr(err, nil)
	}
	last := want - 1
	switch {
	case last != h.Position:
		return nil, nil, corruptf(min(last, h.Position)+1, keyHead, "head says %d, the log ends at %d", h.Position, last)
	case prev != h.Hash:
		return nil, nil, corruptf(last, keyHead, "head hash does not match the last record")
	}
	if progress != nil {
		progress(last, h.Position)
	}
	return streams, cmds, nil
}

// streamVersions holds, per stream, the positions of its versions 1..n in
// order. NB: a pointer per stream, so that appending never stores the key
// again: the walk's stream names alias records it does not keep, and only
// the clone made when a stream is first seen is a key.
type streamVersions map[string]*versions

type versions struct{ pos []uint64 }

// positions returns the positions of stream's versions (none for a stream
// the log does not have).
func (sv streamVersions) positions(stream string) []uint64 {
	if v := sv[stream]; v != nil {
		return v.pos
	}
	return nil
}

// verifyIndex checks that the stream index entries of each stream cover its
// versions 1..n exactly once, in order, each pointing at its record.
func verifyIndex(snap *pebble.Snapshot, streams streamVersions) error {
	it, err := prefixIter(snap, prefixStream)
	if err != nil {
		return orErr(err, nil)
	}
	defer it.Close()
	covered := make(map[string]uint64, len(streams))
	var positions []uint64
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		stream, first, valid := parseStreamKey(k)
		if !valid {
			return corruptf(0, k, "malformed stream index key")
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return orErr(err, nil)
		}
		if positions, err = decodePositions(k, v, positions[:0]); err != nil {
			return err
		}
		vers := streams.positions(stream)
		if first != covered[stream]+1 {
			return corruptf(0, k, "index entry starts at version %d, want %d", first, covered[stream]+1)
		}
		if first+uint64(len(positions))-1 > uint64(len(vers)) {
			return corruptf(0, k, "index entry covers versions the log does not have")
		}
		for i, pos := range positions {
			if want := vers[first-1+uint64(i)]; pos != want {
				return corruptf(want, k, "index points to position %d, the record is at %d", pos, want)
			}
		}
		covered[stream] += uint64(len(positions))
	}
	if err := it.Error(); err != nil {
		return orErr(err, nil)
	}
	// NB: the stream whose first uncovered version comes first in the log, not the first a walk over the map meets:
	// Verify names the first bad position, the same one at every run. Positions start at 1: at 0 none is uncovered.
	var first string
	var at uint64
	total := 0
	for stream, v := range streams {
		if n := covered[stream]; n != uint64(len(v.pos)) && (at == 0 || v.pos[n] < at) {
			first, at, total = stream, v.pos[n], len(v.pos)
		}
	}
	if at > 0 {
		return corruptf(at, appendStreamPrefix(nil, first), "stream index covers %d of %d versions", covered[first], total)
	}
	return nil
}

// verifyCommands checks every outcome of the outcome table and returns how
// many it holds and, of each that wrote events, its span (for verifyCovered).
//
// cmds holds, per position, the seeded hash of the record's principal and
// command id (verifyRecords): an outcome whose two ends hash like it is
// taken as pointing at that command's records, and only a mismatch is read
// back, for the exact report. NB: two point reads per command cost more than
// all the rest of Verify; the records themselves are checksummed and
// chained, and a collision of a per-run random 64-bit seeded hash is not a
// risk that matters next to that.
func verifyCommands(snap *pebble.Snapshot, headPos uint64, ch *commandHasher, cmds []uint64) (int, []outcomeSpan,
	error) {
	var spans []outcomeSpan
	n, err := eachKey(snap, prefixOutcome, func(k, v []byte) error {
		o, err := decodeOutcome(k, v)
		if err != nil {
			return err
		}
		hash := ch.ofOutcome(&o)
		if err := verifyOutcome(snap, headPos, k, &o, hash, cmds, ch); err != nil {
			return err
		}
		if o.Count > 0 {
			spans = append(spans, spanOf(&o, hash))
		}
		return nil
	})
	return n, spans, err
}

// verifyLegacyCommands checks the command table of formats 1 and 2 ('c'
// keys, command id only), which a store keeps until its step to format 3;
// a format-3 store must hold none. It appends to spans the span of each
// outcome that wrote events, hashed as cmds holds its first record (whose
// command id it has just compared): a legacy outcome names no principal,
// so its records must be of the principal that wrote its first.
func verifyLegacyCommands(snap *pebble.Snapshot, headPos uint64, format uint32, ch *commandHasher, cmds []uint64,
	spans *[]outcomeSpan) (int, error) {
	idOnly := &commandHasher{seed: ch.seed}
	return eachKey(snap, prefixCommand, func(k, v []byte) error {
		if format >= FormatPrincipalOutcomes {
			return corruptf(0, k, "outcome of the format-2 layout in a format-%d store", format)
		}
		o, err := decodeLegacyOutcome(k, v)
		if err != nil {
			return err
		}
		// NB: cmds hashes principals when the caller checks them; a legacy
		// outcome has none, so every comparison reads the record back.
		if err := verifyOutcome(snap, headPos, k, &o, 0, nil, idOnly); err != nil {
			return err
		}
		if o.Count > 0 {
			*spans = append(*spans, spanOf(&o, cmds[o.First-1]))
		}
		return nil
	})
}

// iterable is what eachKey reads: a *pebble.DB or a *pebble.Snapshot.
type iterable interface {
	NewIter(*pebble.IterOptions) (*pebble.Iterator, error)
}

// prefixIter opens an iterator over the keys with the one-byte prefix.
func prefixIter(r iterable, prefix byte) (*pebble.Iterator, error) {
	return r.NewIter(&pebble.IterOptions{LowerBound: []byte{prefix}, UpperBound: []byte{prefix + 1}})
}

// eachKey calls fn with every key with the one-byte prefix and its value,
// in order, and returns how many it visited before fn's first error. The
// slices are valid only during the call.
func eachKey(r iterable, prefix byte, fn func(k, v []byte) error) (int, error) {
	it, err := prefixIter(r, prefix)
	if err != nil {
		return 0, orErr(err, nil)
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return n, orErr(err, nil)
		}
		if err := fn(it.Key(), v); err != nil {
			return n, err
		}
		n++
	}
	return n, orErr(it.Error(), nil)
}

// getter is what readRecord reads: a *pebble.DB or a *pebble.Snapshot.
type getter interface {
	Get(key []byte) ([]byte, io.Closer, error)
}

// readRecord decodes the record at pos into ev. NB: its callers read a position the store names (an outcome's), so a
// record missing there is damage, a gap, not a lookup that finds nothing.
func readRecord(g getter, pos uint64, ev *Event) error {
	rv, closer, err := g.Get(eventKey(pos))
	if isNotFound(err) {
		return &CorruptError{Position: pos, Key: keyString(eventKey(pos)), Reason: "missing record"}
	}
	if err != nil {
		return orErr(err, nil)
	}
	err = DecodeRecord(rv, ev)
	closer.Close()
	if err != nil {
		return &CorruptError{Position: pos, Key: keyString(eventKey(pos)), Reason: err.Error()}
	}
	return nil
}

// verifyOutcome checks that o (stored under key k) points inside the log at
// records of its command: want is o's hash as cmds holds its records'; a
// record whose hash differs (or every record, when cmds is nil) is read
// back and compared by ch.
func verifyOutcome(snap *pebble.Snapshot, headPos uint64, k []byte, o *Outcome, want uint64, cmds []uint64,
	ch *commandHasher) error {
	if o.Count == 0 {
		return nil
	}
	if o.First+o.Count-1 > headPos || o.First+o.Count-1 < o.First {
		return corruptf(0, k, "outcome positions %d+%d beyond the head %d", o.First, o.Count, headPos)
	}
	var ev *Event // NB: only a record read back needs one; most are not
	for _, pos := range [2]uint64{o.First, o.First + o.Count - 1} {
		if cmds != nil && pos-1 < uint64(len(cmds)) && cmds[pos-1] == want {
			continue
		}
		if ev == nil {
			ev = new(Event)
		}
		if err := readRecord(snap, pos, ev); err != nil {
			return err
		}
		if ev.CommandID != o.CommandID {
			return corruptf(0, k, "outcome points to position %d, which belongs to command %q", pos, ev.CommandID)
		}
		if ch.principal != nil && o.CommandID != "" {
			if p := ch.principalOf(ev); p != o.Principal {
				return corruptf(0, k, "outcome of principal %q points to position %d, written by principal %q",
					o.Principal, pos, p)
			}
		}
	}
	return nil
}
