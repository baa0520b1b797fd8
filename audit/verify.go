package audit

import (
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
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
}

// Verify checks the store's integrity (eventlog.Log.Verify: checksums,
// positions, the hash chain, the stream index, the outcome table — each
// outcome against the command id and the principal its events name
// (events.EventPrincipal) — the snapshot) and the domain invariants of Check in one pass over the log:
// the invariant fold consumes each record the integrity walk has just
// decoded and checked, instead of reading the log a second time.
//
// A damaged store is an error (it wraps eventlog.ErrCorrupt and names the
// first bad position when the damage is in a record); broken invariants
// are Problems of the report, as with Check.
//
// The integrity walk and the invariant fold run on two goroutines: the walk
// hands each checked record, in order, to the fold through a bounded queue
// of batches, so on two cores the fold's decoding and bookkeeping overlap
// the walk's checksums and hashing.
func Verify(l *eventlog.Log, o *VerifyOptions) (VerifyReport, error) {
	c := newChecker()
	f := startFold(c)
	vo := &eventlog.VerifyOptions{Visit: f.visit, Principal: EventPrincipal}
	if o != nil {
		vo.Progress = o.Progress
	}
	rep, err := l.Verify(vo)
	ferr := f.close()
	if err == nil {
		err = ferr
	}
	if err != nil {
		return VerifyReport{Store: rep, Check: CheckReport{Events: c.events}}, err
	}
	return VerifyReport{Store: rep, Check: c.report()}, nil
}

// foldBatch is how many records cross to the fold goroutine at a time, and
// foldQueue how many batches may wait: enough to keep both cores busy,
// bounded so a fast walk cannot buffer the whole log.
const (
	foldBatch = 256
	foldQueue = 8
)

// fold runs the invariant checker on its own goroutine.
type fold struct {
	c    *checker
	cur  []eventlog.Event
	q    chan []eventlog.Event
	free chan []eventlog.Event
	done chan struct{}
	err  error // the first error of the checker; read after done
}

func startFold(c *checker) *fold {
	f := &fold{c: c, q: make(chan []eventlog.Event, foldQueue), free: make(chan []eventlog.Event, foldQueue+2),
		done: make(chan struct{})}
	go f.run()
	return f
}

// visit is the walk's callback. The record is copied: the walk reuses its
// struct, but the strings and payload it points to are owned and immutable.
func (f *fold) visit(r *eventlog.Event) error {
	if f.cur == nil {
		select {
		case f.cur = <-f.free:
			f.cur = f.cur[:0]
		default:
			f.cur = make([]eventlog.Event, 0, foldBatch)
		}
	}
	f.cur = append(f.cur, *r)
	if len(f.cur) == foldBatch {
		f.q <- f.cur
		f.cur = nil
	}
	return nil
}

func (f *fold) run() {
	defer close(f.done)
	for b := range f.q {
		for i := range b {
			if f.err == nil {
				f.err = f.c.visit(&b[i])
			}
		}
		select {
		case f.free <- b:
		default:
		}
	}
}

// close hands over the last batch, waits for the fold and returns its
// first error.
func (f *fold) close() error {
	if len(f.cur) > 0 {
		f.q <- f.cur
	}
	close(f.q)
	<-f.done
	return f.err
}

// EventPrincipal is the principal (events.Principal.Key) whose command wrote
// a record, as its envelope names it.
func EventPrincipal(ev *eventlog.Event) string {
	return events.EventPrincipal(ev.ActorRole, ev.Stream, ev.ActorTask, ev.CorrelationID).Key()
}
