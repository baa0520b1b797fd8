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
// Idempotent: each outcome's new key is set and its old key deleted in the same chunk (one may hold a key more than
// upgradeChunk), so every outcome is in one layout or the other; an entry is a pure function of the log and the old
// entry, and a rerun after a crash moves what is left. Chunks commit without awaiting their sync as in
// BackfillStreamCatalog.
func (u *Upgrade) MoveOutcomes(principalOf func(first *Event) string) (moved int, err error) {
	l := u.l
	var ev Event
	_, err = eachKey(l.db, prefixCommand, func(k, v []byte) error {
		o, err := decodeLegacyOutcome(k, v)
		if err != nil {
			return err
		}
		var first *Event
		if o.Count > 0 {
			if err := readRecord(l.db, o.First, &ev); err != nil {
				return err
			}
			if ev.CommandID != o.CommandID {
				return corruptf(0, k, "outcome points to position %d, which belongs to command %q", o.First, ev.CommandID)
			}
			first = &ev
		}
		p := principalOf(first)
		if len(p) > MaxPrincipalLen {
			return fmt.Errorf("%w: principal of %d bytes exceeds %d", ErrInvalid, len(p), MaxPrincipalLen)
		}
		// NB: held, not set: a set that fills a chunk commits it, and the old key's deletion went in the next one.
		u.hold(outcomeKey(p, o.CommandID), o.encode())
		if err := u.del(k); err != nil {
			return err
		}
		moved++
		if u.progress != nil && moved%1024 == 0 {
			u.progress(o.First, l.durable.Load().Position)
		}
		return nil
	})
	return moved, err
}

// stageLegacyOutcomes stages into b the rewrite of every outcome in the
// layout of formats 1 and 2 — MoveOutcomes backwards, dropping principal and
// fingerprint — for fixture builds and tests that make an old store.
//
// NB: the only deletion of outcome keys there is, so it empties the index
// of recent outcomes, which may hold them (recent.go).
func (l *Log) stageLegacyOutcomes(b *pebble.Batch) error {
	l.outcomesMu.Lock()
	l.recent.reset()
	l.outcomesMu.Unlock()
	_, err := eachKey(l.db, prefixOutcome, func(k, v []byte) error {
		o, err := decodeOutcome(k, v)
		if err != nil {
			return err
		}
		_ = b.Set(legacyCommandKey(o.CommandID), o.encodeLegacy(), nil)
		return b.Delete(k, nil)
	})
	if err != nil {
		return err
	}
	// The tallies count outcomes under their principals, which the
	// layout of formats 1 and 2 does not have: such a store has none, nor
	// group tallies.
	if err := b.DeleteRange([]byte{prefixTally}, []byte{prefixTally + 1}, nil); err != nil {
		return err
	}
	return b.DeleteRange([]byte{prefixGroupTally}, []byte{prefixGroupTally + 1}, nil)
}

// encodeLegacy encodes o in the layout of formats 1 and 2 (no fingerprint),
// the layout MoveOutcomes reads. Only fixture builds and tests write it.
func (o *Outcome) encodeLegacy() []byte { return o.encodeFields(legacyOutcomeFields) }
