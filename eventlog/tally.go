package eventlog

import (
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Tallies: per principal, how many outcomes the log has recorded that
// wrote no event (a refusal that records nothing else, say). Such an
// outcome grows the store by its key and value and nothing else does: no
// stream, no quota of the caller's counts it. The tally is what lets the
// caller bound them (commands.MaxEventlessOutcomes):
//
//	key   't' | uvarint len | principal
//	value sealed [uvarint count]
//
// A write's tally is set in the batch that records its outcome, so the
// two are never apart, and a lookup sees every append staged before it.
// Builds that predate tallies ignore the keys and do not keep them (the
// store format is unchanged): a store written by one counts its eventless
// outcomes from when it was first appended to by a build that does, so a
// tally is at most its principal's number of eventless outcomes, which is
// what Verify checks.
const prefixTally = 't'

// Group tallies: the same count for a group of principals, the group
// SetTallyGroup's function names for a principal (the engine's: the
// principal's run), so that a caller can bound what many principals
// record together:
//
//	key   'g' | uvarint len | group
//	value sealed [uvarint count]
//
// Set in the same batch as the outcomes they count, by every append to
// the log once the function is set (an engine's own, and a cluster copy's
// of the writer's groups alike). The log does not know which principals a
// group holds, so Verify checks each against all the outcomes with no
// event. Builds that predate them ignore the keys, and an append made
// without the function (or by such a build) is not counted in its group:
// a group tally is at most its outcomes.
const prefixGroupTally = 'g'

// SetTallyGroup sets the function that names the group of a principal's
// outcomes with no event ("" for none; see prefixGroupTally). Set it
// before the first append whose outcomes it should count.
func (l *Log) SetTallyGroup(group func(principal string) string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tallyGroup = group
}

func appendGroupTallyKey(dst []byte, group string) []byte {
	return appendPrefixedStream(dst, prefixGroupTally, group)
}

func appendTallyKey(dst []byte, principal string) []byte {
	return appendPrefixedStream(dst, prefixTally, principal)
}

// parseTallyKey returns the principal of a tally key; ok is false for a
// malformed key.
func parseTallyKey(k []byte) (principal string, ok bool) { return parsePrefixedName(k, prefixTally) }

func decodeTally(key, v []byte) (uint64, error) {
	p, err := unseal(key, v)
	if err != nil {
		return 0, err
	}
	n, w := binary.Uvarint(p)
	if w <= 0 || w != len(p) {
		return 0, corruptf(0, key, "tally of %d bytes is not one count", len(p))
	}
	return n, nil
}

func appendTallyValue(dst []byte, n uint64) []byte {
	start := len(dst)
	dst = binary.AppendUvarint(append(dst, 0, 0, 0, 0, 0), n)
	sealInPlace(dst[start:])
	return dst
}

// EventlessOutcomes returns how many outcomes that wrote no event the log
// has recorded under principal, the appends staged so far included (see
// prefixTally).
func (l *Log) EventlessOutcomes(principal string) (uint64, error) {
	if err := l.readable(); err != nil {
		return 0, err
	}
	return l.readTally(appendTallyKey(nil, principal))
}

// EventlessOutcomesOfGroup returns how many outcomes that wrote no event
// the log has recorded in group's tally, the appends staged so far
// included (see prefixGroupTally).
func (l *Log) EventlessOutcomesOfGroup(group string) (uint64, error) {
	if err := l.readable(); err != nil {
		return 0, err
	}
	return l.readTally(appendGroupTallyKey(nil, group))
}

// readTally reads the tally under key; 0 when there is none.
func (l *Log) readTally(key []byte) (uint64, error) {
	v, closer, err := l.db.Get(key)
	if isNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, tableDamage(fmt.Errorf("eventlog: read tally: %w", err))
	}
	defer closer.Close()
	return decodeTally(key, v)
}

// stageTallies adds to b the tallies of the principals of ws's outcomes
// that wrote no event, each read once and counted up by its writes. Called
// by stage with l.mu held: every earlier append is applied, so the reads
// see it.
func (l *Log) stageTallies(b *pebble.Batch, ws []Write) error {
	var tallies, groups map[string]uint64
	for i := range ws {
		w := &ws[i]
		if w.CommandID == "" || len(w.Events) > 0 {
			continue
		}
		if tallies == nil {
			tallies, groups = reuseMap(&l.stageTally), reuseMap(&l.stageGroups)
		}
		if err := l.countIn(tallies, appendTallyKey, w.Principal); err != nil {
			return err
		}
		if l.tallyGroup == nil {
			continue
		}
		if g := l.tallyGroup(w.Principal); g != "" {
			if err := l.countIn(groups, appendGroupTallyKey, g); err != nil {
				return err
			}
		}
	}
	l.setTallies(b, tallies, appendTallyKey)
	l.setTallies(b, groups, appendGroupTallyKey)
	return nil
}

// setTallies adds to b each of tallies under key(name).
func (l *Log) setTallies(b *pebble.Batch, tallies map[string]uint64, key func([]byte, string) []byte) {
	for name, n := range tallies {
		l.keyScratch = key(l.keyScratch[:0], name)
		l.scratch = appendTallyValue(l.scratch[:0], n)
		_ = b.Set(l.keyScratch, l.scratch, nil)
	}
}

// countIn counts one more outcome in tallies[name], read under key(name)
// the first time.
func (l *Log) countIn(tallies map[string]uint64, key func([]byte, string) []byte, name string) error {
	n, ok := tallies[name]
	if !ok {
		var err error
		if n, err = l.readTally(key(l.keyScratch[:0], name)); err != nil {
			return err
		}
	}
	tallies[name] = n + 1
	return nil
}

// verifyTallies checks every tally: its key, its seal, and that it counts
// at most the outcomes with no event its principal has (eventless, from
// the outcome scan).
func verifyTallies(snap *pebble.Snapshot, eventless map[string]uint64) (int, error) {
	n, err := verifyGroupTallies(snap, eventless)
	if err != nil {
		return n, err
	}
	m, err := eachKey(snap, prefixTally, func(k, v []byte) error {
		principal, ok := parseTallyKey(k)
		if !ok {
			return corruptf(0, k, "malformed tally key")
		}
		n, err := decodeTally(k, v)
		if err != nil {
			return err
		}
		if have := eventless[principal]; n > have {
			return corruptf(0, k, "tally of %d outcomes with no event where the principal has %d", n, have)
		}
		return nil
	})
	return n + m, err
}

// verifyGroupTallies checks every group tally: its key, its seal, and that
// it counts at most all the outcomes with no event (eventless, per
// principal).
func verifyGroupTallies(snap *pebble.Snapshot, eventless map[string]uint64) (int, error) {
	var all uint64
	for _, n := range eventless {
		all += n
	}
	return eachKey(snap, prefixGroupTally, func(k, v []byte) error {
		if _, ok := parsePrefixedName(k, prefixGroupTally); !ok {
			return corruptf(0, k, "malformed group tally key")
		}
		n, err := decodeTally(k, v)
		if err != nil {
			return err
		}
		if n > all {
			return corruptf(0, k, "group tally of %d outcomes with no event where the log has %d", n, all)
		}
		return nil
	})
}
