package eventlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/cockroachdb/pebble/v2"
)

// Outcome is what the outcome table records for a decided command: the
// positions of its events and, for a rejection, the code and reason. Result
// is an opaque blob the caller stores so that a retry can be answered with
// exactly the response the first attempt got; Fingerprint is the caller's
// digest of the request, so that a retry can be told from another request
// reusing the id.
//
// The table is keyed by (Principal, CommandID): Principal is opaque to the
// log (the caller's canonical encoding of whose id it is), and two
// principals' ids never meet.
type Outcome struct {
	Principal   string
	CommandID   string
	First       uint64 // position of the command's first event; 0 when Count is 0
	Count       uint64 // number of events the command wrote (a rejection may write some)
	Code        string // "" means accepted
	Reason      string
	Result      []byte
	Fingerprint []byte // empty for an outcome recorded before format 3
}

// Accepted reports whether the command was accepted.
func (o *Outcome) Accepted() bool { return o.Code == "" }

const (
	outcomeFields       = 6
	legacyOutcomeFields = 5 // formats 1 and 2: no fingerprint
)

func (o *Outcome) encode() []byte { return o.encodeFields(outcomeFields) }

// encodeFields encodes the first fields fields of o's value, sealed.
func (o *Outcome) encodeFields(fields int) []byte {
	return o.appendSealed(make([]byte, 0, o.sealedSize()), fields)
}

// sealedSize bounds the length of o's sealed value.
func (o *Outcome) sealedSize() int {
	return 5 + 40 + len(o.Code) + len(o.Reason) + len(o.Result) + len(o.Fingerprint)
}

// appendSealed appends o's value (its first fields fields), sealed, to dst:
// the bytes of seal(payload), written in place so that an append encodes
// each outcome into its scratch buffer without an allocation.
func (o *Outcome) appendSealed(dst []byte, fields int) []byte {
	start := len(dst)
	dst = append(dst, sealVersion, 0, 0, 0, 0)
	dst = appendArrayHeader(dst, fields)
	dst = appendUint(dst, o.First)
	dst = appendUint(dst, o.Count)
	dst = appendStr(dst, o.Code)
	dst = appendStr(dst, o.Reason)
	dst = appendBin(dst, o.Result)
	if fields == outcomeFields {
		dst = appendBin(dst, o.Fingerprint)
	}
	binary.BigEndian.PutUint32(dst[start+1:start+5], crc32.Checksum(dst[start+5:], castagnoli))
	return dst
}

// decodeOutcome decodes an entry of the outcome table (format 3).
func decodeOutcome(key, value []byte) (Outcome, error) {
	principal, id, ok := parseOutcomeKey(key)
	if !ok {
		return Outcome{}, corruptf(0, key, "malformed outcome key")
	}
	o, err := decodeOutcomeValue(key, value, outcomeFields)
	o.Principal, o.CommandID = principal, id
	return o, err
}

// decodeLegacyOutcome decodes an entry of the command table of formats 1
// and 2 (key c | command id, no principal, no fingerprint).
func decodeLegacyOutcome(key, value []byte) (Outcome, error) {
	o, err := decodeOutcomeValue(key, value, legacyOutcomeFields)
	o.CommandID = string(key[1:])
	return o, err
}

func decodeOutcomeValue(key, value []byte, fields int) (Outcome, error) {
	p, err := unseal(key, value)
	if err != nil {
		return Outcome{}, err
	}
	owned := append([]byte(nil), p...)
	r := reader{b: owned}
	if n := r.arrayLen(); r.err == nil && n != fields {
		return Outcome{}, corruptf(0, key, "outcome has %d fields, want %d", n, fields)
	}
	var o Outcome
	o.First = r.uint()
	o.Count = r.uint()
	o.Code = r.str()
	o.Reason = r.str()
	o.Result = r.bin()
	if fields == outcomeFields {
		if fp := r.bin(); len(fp) > 0 {
			o.Fingerprint = fp
		}
	}
	if r.err == nil && r.off != len(r.b) {
		r.err = errors.New("trailing bytes")
	}
	if r.err != nil {
		return Outcome{}, corruptf(0, key, "outcome: %v", r.err)
	}
	if (o.Count == 0) != (o.First == 0) {
		return Outcome{}, corruptf(0, key, "outcome positions first=%d count=%d", o.First, o.Count)
	}
	return o, nil
}

// Outcome returns the recorded outcome of principal's command id, or an
// error wrapping ErrNotFound. Only durable outcomes are returned: an
// outcome whose append has not finished syncing is reported as not found.
// Another principal's outcome under the same id is never looked at.
//
// On a store older than format 3 (read-only, or before its migration) the
// outcomes recorded before the upgrade are not found.
func (l *Log) Outcome(principal, commandID string) (Outcome, error) {
	if err := l.readable(); err != nil {
		return Outcome{}, err
	}
	// NB: the key on the stack, and a copy of it only for Pebble: the
	// writer asks about every new id, and the answer is nearly always
	// known without Pebble.
	var buf [96]byte
	key := appendOutcomeKey(buf[:0], principal, commandID)
	h := l.filter.hash(key)
	// NB: outcomesMu, not l.mu, which an append holds while Pebble holds it back (log.go).
	l.outcomesMu.Lock()
	_, pending := l.pending[string(key)]
	o, recent := l.recent.get(key)
	absent := l.filter.provesAbsent(h)
	gen := l.gen
	l.outcomesMu.Unlock()
	if pending {
		return Outcome{}, &unrecordedError{commandID: commandID, pending: true}
	}
	if absent {
		return Outcome{}, &unrecordedError{commandID: commandID}
	}
	if recent {
		o = o.clone()
		o.Principal, o.CommandID = principal, commandID
		return o, nil
	}
	owned := bytes.Clone(key)
	if l.opts.beforeOutcomeRead != nil {
		l.opts.beforeOutcomeRead()
	}
	v, found, err := l.lookupOutcome(owned)
	if err != nil {
		return Outcome{}, err
	}
	if !found {
		l.noteAbsent(string(owned), gen)
		return Outcome{}, &unrecordedError{commandID: commandID}
	}
	// NB: Pebble shows an append's batch from its hand-off on, before its sync, and the append may have been staged
	// since the check above: it is pending from before its hand-off until its sync returned (or for good, failed).
	if l.isPending(owned) {
		return Outcome{}, &unrecordedError{commandID: commandID, pending: true}
	}
	return decodeOutcome(owned, v)
}

// isPending reports whether key is the outcome key of an append handed to Pebble whose sync has not returned.
func (l *Log) isPending(key []byte) bool {
	l.outcomesMu.Lock()
	defer l.outcomesMu.Unlock()
	_, pending := l.pending[string(key)]
	return pending
}

// unrecordedError is Outcome's answer for an id with no durable outcome; it
// wraps ErrNotFound. NB: formatted only when printed: the writer asks about
// every new command id and only tests errors.Is.
type unrecordedError struct {
	commandID string
	pending   bool // handed to Pebble, not yet synced
}

func (e *unrecordedError) Error() string {
	if e.pending {
		return fmt.Sprintf("%v: command %q is being recorded", ErrNotFound, e.commandID)
	}
	return fmt.Sprintf("%v: command %q", ErrNotFound, e.commandID)
}

func (e *unrecordedError) Unwrap() error { return ErrNotFound }

// lookupOutcome reads key from the outcome table; v is a copy.
//
// NB: not Pebble's Get, which never consults the bloom filters of the
// bottom level (their blocks can be large, and a Get is expected to find
// its key). A command id is new far more often than not, and in a store
// that has compacted its outcomes to the bottom level every such Get reads
// and decompresses an index and a data block of a table that compactions
// keep rewriting. A prefix seek that opts into those filters answers most
// new ids from the filter block alone.
func (l *Log) lookupOutcome(key []byte) (v []byte, found bool, err error) {
	l.outcomeReads.Add(1)
	bounds := make([]byte, 0, 2*len(key)+1)
	bounds = append(bounds, key...)
	upper := append(bounds[len(bounds):], key...)
	upper = append(upper, 0) // the smallest key after key
	it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: bounds, UpperBound: upper, UseL6Filters: true})
	if err != nil {
		return nil, false, tableDamage(fmt.Errorf("eventlog: read outcome: %w", err))
	}
	if it.SeekPrefixGE(key) && bytes.Equal(it.Key(), key) {
		var val []byte
		if val, err = it.ValueAndErr(); err == nil {
			v, found = append([]byte(nil), val...), true
		}
	}
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, false, tableDamage(fmt.Errorf("eventlog: read outcome: %w", err))
	}
	return v, found, nil
}

// maxAbsent bounds the outcome keys remembered as absent between two
// appends.
const maxAbsent = 1 << 16

// noteAbsent remembers that key had no outcome when no append had been
// staged since gen. If one was staged meanwhile, the observation may be
// stale and is dropped.
func (l *Log) noteAbsent(key string, gen uint64) {
	l.outcomesMu.Lock()
	defer l.outcomesMu.Unlock()
	if l.gen == gen && len(l.absent) < maxAbsent {
		l.absent[key] = gen
	}
}

// forgetAbsent drops what lookups found unrecorded, for a writer of outcome keys other than an append (the step to
// format 3), once its writes are visible: a lookup that read Pebble before them then notes nothing (gen moved on),
// and one after them reads them.
func (l *Log) forgetAbsent() {
	l.outcomesMu.Lock()
	defer l.outcomesMu.Unlock()
	l.gen++
	clear(l.absent)
}
