package eventlog

import (
	"errors"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

// outcomeScan reads the outcome table on a goroutine of its own while
// Verify walks the records: it decodes every outcome, checks that it points
// inside the head, and keeps of each that wrote events only its first and
// last positions and the hash its records must have (commandHasher), 24
// bytes an outcome. Once the walk has the records' hashes, verify compares
// them; the table is read again, by verifyCommands, only when something
// does not match, so that the problem reported is exactly the one a single
// pass reports.
type outcomeScan struct {
	spans []outcomeSpan
	// eventless counts, per principal, the outcomes that wrote no event,
	// for the tallies' check.
	eventless map[string]uint64
	n         int   // outcomes read
	err       error // the first outcome that does not decode or points past the head
	quit      atomic.Bool
	done      chan struct{}
}

// outcomeSpan is what an outcome that wrote events asks of the records.
type outcomeSpan struct{ first, last, hash uint64 }

// spanOf is the span of o, an outcome that wrote events (Count > 0), whose
// records must hash as hash: the scan, the exact pass and the legacy
// table's pass (verify.go) all take an outcome's span this way.
func spanOf(o *Outcome, hash uint64) outcomeSpan {
	return outcomeSpan{first: o.First, last: o.First + o.Count - 1, hash: hash}
}

// scanOutcomes starts reading the outcome table of snap; ch hashes the
// outcomes as the walk's hasher hashes records (the same seed and, set or
// not, principals), but is the goroutine's own. The caller calls stop
// before the snapshot is closed.
func scanOutcomes(snap *pebble.Snapshot, headPos uint64, ch *commandHasher) *outcomeScan {
	s := &outcomeScan{done: make(chan struct{}), eventless: make(map[string]uint64)}
	go func() {
		defer close(s.done)
		s.n, s.err = eachKey(snap, prefixOutcome, func(k, v []byte) error {
			if s.quit.Load() {
				return errScanStopped
			}
			o, err := decodeOutcome(k, v)
			if err != nil {
				return err
			}
			if o.Count == 0 {
				s.eventless[o.Principal]++
				return nil
			}
			span := spanOf(&o, ch.ofOutcome(&o))
			if span.last > headPos || span.last < span.first {
				return corruptf(0, k, "outcome positions %d+%d beyond the head %d", o.First, o.Count, headPos)
			}
			s.spans = append(s.spans, span)
			return nil
		})
	}()
	return s
}

// errScanStopped ends a scan whose Verify has already failed.
var errScanStopped = errors.New("eventlog: outcome scan stopped")

// stop ends the scan early (Verify failed before it needed it) and waits
// for it.
func (s *outcomeScan) stop() {
	s.quit.Store(true)
	<-s.done
}

// verify waits for the scan and returns how many outcomes the table holds,
// and the spans of those that wrote events, when every outcome decoded,
// points inside the head and at records whose hash (cmds, from the walk) is
// its own; otherwise it returns what exact (the single pass of
// verifyCommands) returns.
func (s *outcomeScan) verify(cmds []uint64, exact func() (int, []outcomeSpan, error)) (int, []outcomeSpan, error) {
	<-s.done
	if s.err != nil {
		return exact()
	}
	for _, sp := range s.spans {
		if sp.last > uint64(len(cmds)) || cmds[sp.first-1] != sp.hash || cmds[sp.last-1] != sp.hash {
			return exact()
		}
	}
	return s.n, s.spans, nil
}
