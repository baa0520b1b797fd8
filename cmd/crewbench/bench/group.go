package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crewlog/crewlog/events"
)

// sink is where a group committer writes, with a single sync per group (one
// write + fdatasync, or one synced Pebble batch).
type sink interface {
	// Write makes one group durable: recs are its records, buf their
	// bytes back to back.
	Write(recs []sinkRecord, buf []byte) error
	// ReadAll calls fn for every record, in position order.
	ReadAll(fn func(decodedRecord) error) error
	Close() error
}

// sinkRecord is one encoded record with its stream key.
type sinkRecord struct {
	Pos, Version uint64
	Stream, Type string
	TimeNs       int64
	Bytes        []byte // the whole record (appendRecord)
	PayloadLen   int    // the payload is the record's last PayloadLen bytes
	First        bool   // the first record of a decision or settlement
}

// Payload is the record's event payload.
func (r sinkRecord) Payload() []byte { return r.Bytes[len(r.Bytes)-r.PayloadLen:] }

// groupStore is the scheme crewlog uses, with the thinnest storage under
// it: one committer goroutine takes the first queued request, drains
// whatever else is queued (up to maxGroup), decides each against the
// working state — so each sees the ones before it, and the version check of
// optimistic concurrency cannot fail —, and hands the group to a writer
// goroutine, which writes it with one sync and answers. While the writer
// writes a group, the committer keeps the next one open and decides every
// request as it arrives, and hands it off once that write has returned: the
// pipeline of crewlog's engine (commands/pipeline.go), whose decisions
// overlap the sync before them.
//
// Concurrency: Admit and Settle from any goroutine. Errors: after a sink
// error the store fails stop.
type groupStore struct {
	sink  sink
	reqs  chan *groupReq
	done  chan struct{}
	quit  chan struct{}        // closed when the committer has returned
	runs  map[string]*runState // owned by the committer after Setup
	pos   uint64
	mu    sync.Mutex
	fail  error
	close sync.Once
	// commits counts the groups written (one sync each).
	commits atomic.Int64
	// afterDecide, when set, runs after each request is decided: only a
	// test sets it, to see what is decided while a group's write runs.
	afterDecide func()
}

const maxGroup = 1024

type groupReq struct {
	run     string
	tokens  int64  // admission
	subID   string // settlement when set
	outcome string
	answer  Admission
	err     error
	ready   chan struct{}
}

func newGroupStore(s sink) *groupStore {
	g := &groupStore{sink: s, reqs: make(chan *groupReq, 4*maxGroup), done: make(chan struct{}),
		runs: map[string]*runState{}}
	return g
}

func (g *groupStore) Setup(_ context.Context, runs []string, spec Spec) error {
	var recs []sinkRecord
	var buf []byte
	now := time.Now()
	for _, r := range runs {
		st := &runState{Granted: spec.Budget, Slots: spec.Slots}
		rc, err := events.EncodePayload(runCreated(spec.Budget).Payload)
		if err != nil {
			return err
		}
		g.pos++
		st.Version++
		rec := appendRecord(nil, g.pos, r, st.Version, events.TypeRunCreated, now.UnixNano(), rc)
		recs = append(recs, sinkRecord{Pos: g.pos, Version: st.Version, Stream: r, Type: events.TypeRunCreated,
			TimeNs: now.UnixNano(), Bytes: rec, PayloadLen: len(rc), First: true})
		buf = append(buf, rec...)
		g.runs[r] = st
	}
	if err := g.sink.Write(recs, buf); err != nil {
		return err
	}
	g.quit = make(chan struct{})
	go g.commit()
	return nil
}

func (g *groupStore) submit(ctx context.Context, r *groupReq) error {
	r.ready = make(chan struct{})
	select {
	case g.reqs <- r:
	case <-g.done:
		return errors.New("bench: store closed")
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-r.ready:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *groupStore) Admit(ctx context.Context, run string, tokens int64) (Admission, error) {
	r := &groupReq{run: run, tokens: tokens}
	if err := g.submit(ctx, r); err != nil {
		// NB: the committer may still be deciding r: its answer is not ours
		// to read.
		return Admission{}, err
	}
	return r.answer, nil
}

func (g *groupStore) Settle(ctx context.Context, run, subID, outcome string) error {
	return g.submit(ctx, &groupReq{run: run, subID: subID, outcome: outcome})
}

// groupFlight is one group: its requests, their records and the records'
// bytes. The committer fills one while the writer writes the other.
type groupFlight struct {
	pend []*groupReq
	recs []sinkRecord
	buf  []byte
}

// commit is the committer: it decides the requests into an open group, and
// keeps that group open — deciding every request as it arrives — while the
// group before it is written and synced, then hands it to the writer once
// that write has returned (or when it is full, after waiting for it). So a
// group holds what arrived during one sync and its decisions overlap the
// sync, as in crewlog's engine (commands/pipeline.go), and the sink is still
// written by one goroutine, one group and one sync at a time.
func (g *groupStore) commit() {
	defer close(g.quit)
	toWrite, written := make(chan *groupFlight), make(chan *groupFlight)
	go g.write(toWrite, written)
	defer close(toWrite)
	open, spare := &groupFlight{}, &groupFlight{}
	writing := false
	for {
		var first *groupReq
		select {
		case first = <-g.reqs:
		case <-g.done:
			if writing {
				<-written
			}
			return
		}
		open.pend, open.recs, open.buf = open.pend[:0], open.recs[:0], open.buf[:0]
		g.add(open, first)
		for writing {
			in := g.reqs
			if len(open.pend) >= maxGroup {
				in = nil // full: wait for the write only
			}
			select {
			case f := <-written:
				spare, writing = f, false
			case r := <-in:
				g.add(open, r)
			}
		}
		// NB: records point into buf, which may have moved while growing:
		// slice them only now.
		off := 0
		for i := range open.recs {
			n := len(open.recs[i].Bytes)
			open.recs[i].Bytes = open.buf[off : off+n]
			off += n
		}
		toWrite <- open
		open, spare, writing = spare, nil, true
	}
}

// add decides r and whatever else is queued (up to maxGroup in all) into f.
func (g *groupStore) add(f *groupFlight, r *groupReq) {
	from := len(f.pend)
	f.pend = append(f.pend, r)
drain:
	for len(f.pend) < maxGroup {
		select {
		case r := <-g.reqs:
			f.pend = append(f.pend, r)
		default:
			break drain
		}
	}
	now := time.Now()
	for _, r := range f.pend[from:] {
		f.recs, f.buf, r.answer, r.err = g.decide(r, f.recs, f.buf, now)
		if g.afterDecide != nil {
			g.afterDecide()
		}
	}
}

// write is the writer: it writes each group handed to it with one sync,
// answers its requests, and hands it back on written. After a sink error
// the store fails stop: every later group is answered with the error.
func (g *groupStore) write(toWrite <-chan *groupFlight, written chan<- *groupFlight) {
	for f := range toWrite {
		err := g.failure()
		if err == nil && len(f.recs) > 0 {
			g.commits.Add(1)
			if err = g.sink.Write(f.recs, f.buf); err != nil {
				g.mu.Lock()
				g.fail = fmt.Errorf("bench: commit: %w", err)
				g.mu.Unlock()
				err = g.failure()
			}
		}
		for _, r := range f.pend {
			if err != nil {
				r.err = err
			}
			close(r.ready)
		}
		written <- f
	}
}

// decide runs one request against the working state and encodes its events.
func (g *groupStore) decide(r *groupReq, recs []sinkRecord, buf []byte, now time.Time) ([]sinkRecord, []byte,
	Admission, error) {
	st, ok := g.runs[r.run]
	if !ok {
		return recs, buf, Admission{}, fmt.Errorf("bench: no run %s", r.run)
	}
	var evs []event
	var ans Admission
	if r.subID != "" {
		var err error
		if evs, err = settleEvents(r.subID, r.outcome); err != nil {
			return recs, buf, ans, err
		}
		if err := st.settle(r.subID); err != nil {
			return recs, buf, ans, err
		}
	} else {
		sub := newSubID()
		reason := st.decide(r.tokens)
		evs = decisionEvents(st, sub, reason, r.tokens, now.UnixMilli())
		if reason == "" {
			st.admit(sub, r.tokens)
			ans.SubID = sub
		}
		ans.Reason = reason
	}
	for i, e := range evs {
		g.pos++
		st.Version++
		var start int
		buf, start = appendRecordHead(buf, g.pos, r.run, st.Version, e.Type, now.UnixNano())
		head := len(buf)
		var err error
		if buf, err = events.AppendPayload(buf, e.Payload); err != nil {
			return recs, buf[:start], ans, err // NB: buf holds whole records only
		}
		buf = sealRecord(buf, start)
		recs = append(recs, sinkRecord{Pos: g.pos, Version: st.Version, Stream: r.run, Type: e.Type,
			TimeNs: now.UnixNano(), Bytes: buf[start:], PayloadLen: len(buf) - head, First: i == 0})
	}
	return recs, buf, ans, nil
}

// Commits counts the groups written.
func (g *groupStore) Commits() int64 { return g.commits.Load() }

func (g *groupStore) failure() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.fail
}

func (g *groupStore) Final(context.Context) (map[string]Final, error) {
	f := newFinals()
	err := g.sink.ReadAll(f.addRecord)
	return f.result(), err
}

func (g *groupStore) Close() error {
	g.close.Do(func() { close(g.done) })
	if g.quit != nil {
		<-g.quit // the committer may be inside a Write
	}
	return g.sink.Close()
}
