package eventlog

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// verifyCovered checks the converse of the outcomes' check: that every
// record stamped with a command id lies inside the span of an outcome of
// that command (and, with VerifyOptions.Principal, of that principal), and
// that no record lies inside the span of another command's outcome. An
// append writes a command's records one after another and their outcome in
// the same batch, so in a sound store the spans do not overlap and cover
// exactly the records that carry a command id.
//
// NB: the outcome table is ordered by (principal, command id) and the
// records by position, which have nothing to do with each other, so no
// streaming merge of the two exists: one side must be held. Verify already
// holds both for the outcomes' check, 8 bytes a record (cmds, the hash of
// its principal and command id) and 24 an outcome that wrote events
// (spans), and no command id itself; this check sorts spans by position in
// place and sweeps cmds once, so it reads nothing more from the store and
// holds nothing more than Verify did. A problem is read back from the
// record, for the exact report.
func verifyCovered(snap *pebble.Snapshot, cmds []uint64, spans []outcomeSpan, ch *commandHasher) error {
	slices.SortFunc(spans, func(a, b outcomeSpan) int { return cmp.Compare(a.first, b.first) })
	noCommand := ch.of("", "") // what ofRecord gives a record of no command
	next := 0                  // the first span that starts after the position swept
	for i, hash := range cmds {
		pos := uint64(i) + 1
		for next < len(spans) && spans[next].first <= pos {
			next++
		}
		var in *outcomeSpan // the span that starts last at or before pos, when it reaches pos
		if next > 0 && spans[next-1].last >= pos {
			in = &spans[next-1]
		}
		switch {
		case in != nil && in.hash != hash:
			return uncovered(snap, pos, ch, fmt.Sprintf("lies inside positions %d-%d, which an outcome of another "+
				"command names", in.first, in.last))
		case in == nil && hash != noCommand:
			return uncovered(snap, pos, ch, "is named by no outcome")
		}
	}
	return nil
}

// uncovered is the damage of the record at pos that verifyCovered found
// named by no outcome of its command; what describes where it lies.
func uncovered(snap *pebble.Snapshot, pos uint64, ch *commandHasher, what string) error {
	var ev Event
	if err := readRecord(snap, pos, &ev); err != nil {
		return err
	}
	whose := "no command"
	if ev.CommandID != "" {
		whose = fmt.Sprintf("command %q", ev.CommandID)
	}
	if ch.principal != nil && ev.CommandID != "" {
		whose += fmt.Sprintf(" of principal %q", ch.principalOf(&ev))
	}
	return corruptf(pos, eventKey(pos), "record of %s %s", whose, what)
}
