package audit

import (
	"errors"
	"fmt"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// VerifyOptions tune Verify; nil means defaults.
type VerifyOptions struct {
	// Progress, when set, is called now and then with the events checked
	// and the durable head.
	Progress func(done, total uint64)
}

// VerifyReport is what Verify found: the store's integrity report and the
// invariant check over the same records.
type VerifyReport struct {
	Store eventlog.VerifyReport
	Check CheckReport
	// UnusableSnapshot, when set, is the newest snapshot, whole, that start-up will not load: the store is sound,
	// but crewd's next start folds the log from position 1.
	UnusableSnapshot *UnusableSnapshot
}

// UnusableSnapshot is a snapshot whose seal holds but which start-up ignores (projections.LoadTiered): its bytes do
// not decode as this build's snapshot (another build's format, or bytes that are no snapshot), or it holds the state
// at another position than the one it is stored at.
type UnusableSnapshot struct {
	Position uint64 // where it is stored
	Reason   string
}

// Verify checks the store's integrity (eventlog.Log.Verify: checksums,
// positions, the hash chain, the stream index, the outcome table — each
// outcome against the command id and the principal its events name
// (events.EventPrincipal), and each record of a command against its
// outcome — the snapshot, the derived data) and the domain invariants of
// Check in one pass over the log:
// the invariant fold consumes each record the integrity walk has just
// decoded and checked, instead of reading the log a second time.
//
// A damaged store is an error (it wraps eventlog.ErrCorrupt and names the
// first bad position when the damage is in a record); a read that fails (an
// I/O error) is an error that does not wrap it: the store was not checked.
// Broken invariants are Problems of the report, as with Check.
//
// The integrity walk, the payload decoding and the invariant fold run on
// three goroutines (pipeline.go): the walk hands each checked record, in
// order, to the decoder through a bounded queue of batches, so on two cores
// the fold's decoding and bookkeeping overlap the walk's checksums and
// hashing.
func Verify(l *eventlog.Log, o *VerifyOptions) (VerifyReport, error) {
	c := newChecker()
	f := startFold(c)
	vo := &eventlog.VerifyOptions{Visit: f.visit, Principal: AppendEventPrincipal}
	if o != nil {
		vo.Progress = o.Progress
	}
	rep, err := l.Verify(vo)
	ferr := f.close()
	if err == nil {
		err = ferr
	}
	var unusable *UnusableSnapshot
	if err == nil {
		unusable, err = verifyIndexCoverage(l)
	}
	if err != nil {
		return VerifyReport{Store: rep, Check: CheckReport{Events: c.events}}, err
	}
	return VerifyReport{Store: rep, Check: c.report(), UnusableSnapshot: unusable}, nil
}

// fold runs the invariant checker: the payloads of the records the walk
// hands over are decoded on one goroutine (pipeline.go) and checked on
// another, in order.
type fold struct {
	c   *checker
	p   *payloads
	cur *rawBatch
	// NB: written by the checking goroutine only, read after done.
	err  error // the first error: a payload that does not decode
	done chan struct{}
}

func startFold(c *checker) *fold {
	f := &fold{c: c, p: startPayloads(nil), done: make(chan struct{})}
	go f.run()
	return f
}

// visit is eventlog.VerifyOptions.Visit: it queues a copy of the record
// (r is valid only during the call).
func (f *fold) visit(r *eventlog.Event) error {
	if f.cur == nil {
		f.cur = f.p.rawBatch()
	}
	f.cur.add(r)
	if len(f.cur.recs) == batchSize {
		f.p.in <- f.cur
		f.cur = nil
	}
	return nil
}

func (f *fold) run() {
	defer close(f.done)
	for b := range f.p.out {
		for _, ev := range b.evs {
			if f.err == nil {
				f.c.check(ev)
			}
		}
		if f.err == nil {
			f.err = b.err
		}
		f.p.recycle(b)
	}
}

// close hands over the last batch, waits for the fold and returns its
// first error.
func (f *fold) close() error {
	if f.cur != nil && len(f.cur.recs) > 0 {
		f.p.in <- f.cur
	}
	close(f.p.in)
	<-f.done
	return f.err
}

// AppendEventPrincipal appends to dst the principal (events.Principal.Key)
// whose command wrote a record, as its envelope names it.
func AppendEventPrincipal(dst []byte, ev *eventlog.Event) []byte {
	return events.EventPrincipal(ev.ActorRole, ev.Stream, ev.ActorTask, ev.CorrelationID).AppendKey(dst)
}

// verifyIndexCoverage checks that the index of finished runs' summaries
// holds every run the newest snapshot relies on it for (the snapshot lists
// only the runs in memory): an index removed by hand, in whole or in part,
// while the snapshot stayed. eventlog's Verify checks each summary and
// that the index's count agrees with its keys, but cannot tell how many
// runs it should hold. A snapshot start-up does not load is not the index's
// problem (start-up ignores it and folds from position 1): it is returned,
// and the index is not checked against it.
func verifyIndexCoverage(l *eventlog.Log) (*UnusableSnapshot, error) {
	snap, err := l.LatestSnapshot()
	if errors.Is(err, eventlog.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		// NB: Verify has just read this snapshot whole, so this is a read that failed since (its blocks had left the
		// cache): the index was not checked, and the store not read through.
		return nil, err
	}
	// NB: the checks projections.LoadTiered makes before it uses a snapshot.
	s, err := projections.DecodeSnapshot(snap.Data)
	if err != nil {
		return &UnusableSnapshot{Position: snap.Position, Reason: err.Error()}, nil
	}
	if s.Position != snap.Position {
		reason := fmt.Sprintf("it holds the state at position %d", s.Position)
		return &UnusableSnapshot{Position: snap.Position, Reason: reason}, nil
	}
	want := s.ColdRuns() - s.ColdInMemory()
	got, err := l.SummaryStreamsAt(snap.Position)
	if err != nil {
		return nil, err
	}
	if got < uint64(max(want, 0)) {
		return nil, &eventlog.CorruptError{Key: "u (index of summaries)", Reason: fmt.Sprintf(
			"the index of finished runs' summaries holds %d runs at or before position %d; the snapshot there "+
				"relies on it for %d (crewd rebuilds it from the log at its next start)",
			got, snap.Position, want)}
	}
	return nil, nil
}
