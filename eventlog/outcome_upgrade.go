package eventlog

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// MoveOutcomes moves every outcome of the format-2 command table (c |
// command id) to the outcome table of format 3 (o | principal | command
// id). It is the body of the step to format 3.
//
// principalOf names the principal of an outcome from the first event its
// command wrote, or from nil when it wrote none; the log cannot tell, it
// does not interpret envelopes. A moved outcome has no fingerprint: the
// request that first used the id was never digested.
//
// Idempotent: each outcome's new key is set and its old key deleted in the
// same chunk, an entry is a pure function of the log and the old entry, and
// a rerun after a crash moves what is left. Chunks commit without sync as
// in BackfillStreamCatalog.
func (u *Upgrade) MoveOutcomes(principalOf func(first *Event) string) (moved int, err error) {
	l := u.l
	it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixCommand}, UpperBound: []byte{prefixCommand + 1}})
	if err != nil {
		return 0, fmt.Errorf("eventlog: %w", err)
	}
	defer it.Close()
	var ev Event
	for ok := it.First(); ok; ok = it.Next() {
		k := append([]byte(nil), it.Key()...)
		v, err := it.ValueAndErr()
		if err != nil {
			return moved, orErr(err, nil)
		}
		o, err := decodeLegacyOutcome(k, v)
		if err != nil {
			return moved, err
		}
		var first *Event
		if o.Count > 0 {
			rv, closer, err := l.db.Get(eventKey(o.First))
			if err != nil {
				return moved, orErr(err, nil)
			}
			err = DecodeRecord(rv, &ev)
			closer.Close()
			if err != nil {
				return moved, &CorruptError{Position: o.First, Key: keyString(eventKey(o.First)), Reason: err.Error()}
			}
			if ev.CommandID != o.CommandID {
				return moved, corruptf(0, k, "outcome points to position %d, which belongs to command %q", o.First, ev.CommandID)
			}
			first = &ev
		}
		p := principalOf(first)
		if len(p) > MaxPrincipalLen {
			return moved, fmt.Errorf("%w: principal of %d bytes exceeds %d", ErrInvalid, len(p), MaxPrincipalLen)
		}
		if err := u.set(outcomeKey(p, o.CommandID), o.encode()); err != nil {
			return moved, err
		}
		if err := u.del(k); err != nil {
			return moved, err
		}
		moved++
		if u.progress != nil && moved%1024 == 0 {
			u.progress(o.First, l.durable.Load().Position)
		}
	}
	return moved, orErr(it.Error(), nil)
}

// encodeLegacy encodes o in the layout of formats 1 and 2 (no fingerprint),
// the layout MoveOutcomes reads. Only fixture builds and tests write it.
func (o *Outcome) encodeLegacy() []byte {
	b := make([]byte, 0, 32+len(o.Code)+len(o.Reason)+len(o.Result))
	b = appendArrayHeader(b, legacyOutcomeFields)
	b = appendUint(b, o.First)
	b = appendUint(b, o.Count)
	b = appendStr(b, o.Code)
	b = appendStr(b, o.Reason)
	b = appendBin(b, o.Result)
	return seal(b)
}
