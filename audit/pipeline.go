package audit

import (
	"unsafe"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// Replay and Verify split their work over three goroutines: one reads the
// log (storage scan and record decode, and for Verify the checksums, the
// hash chain and the index bookkeeping), one decodes payloads, and the
// caller's folds (projections.Apply and what the options ask for). Each of
// the three costs about a third of the whole, so on two cores no stage
// waits for a single one that does two thirds. Batches travel in log order
// over bounded channels, so the fold sees exactly the sequence a single
// loop would: the result is the same, only sooner.

const (
	// batchSize events per hand-over: channel operations cost nothing next
	// to decoding that many payloads.
	batchSize = 256
	// batchesAhead bounds how far each stage runs ahead of the next, and
	// with it the memory held by events read but not yet folded.
	batchesAhead = 8
)

// rawBatch is a run of records as the log returned them; err, on the last
// batch, ends the stream. The records' strings and payloads live in buf,
// which the batch keeps from one use to the next: the log's records are
// read without a copy of their own (eventlog.ReadTransient,
// VerifyOptions.Visit), copied here, and the payload stage hands on only
// copies it owns, so a recycled batch frees nothing for the collector.
type rawBatch struct {
	recs []eventlog.Event
	buf  []byte
	err  error
}

// add appends a copy of r, valid until the batch is recycled.
func (rb *rawBatch) add(r *eventlog.Event) {
	rb.recs = append(rb.recs, *r)
	c := &rb.recs[len(rb.recs)-1]
	strs := [...]*string{&c.Stream, &c.Type, &c.CommandID, &c.CausationID, &c.CorrelationID, &c.ActorRole, &c.ActorTask}
	var offs [len(strs) + 1]int
	for i, s := range strs {
		offs[i] = len(rb.buf)
		rb.buf = append(rb.buf, *s...)
	}
	offs[len(strs)] = len(rb.buf)
	rb.buf = append(rb.buf, r.Payload...)
	// NB: the copies point into rb.buf only once the whole record is in,
	// so a buffer that grew on the way holds all of them.
	for i, s := range strs {
		*s = ""
		if n := offs[i+1] - offs[i]; n > 0 {
			*s = unsafe.String(&rb.buf[offs[i]], n)
		}
	}
	c.Payload = rb.buf[offs[len(strs)]:len(rb.buf):len(rb.buf)]
}

// batch is a run of decoded events; err, on the last batch, ends the stream.
type batch struct {
	evs []events.Event
	err error
}

// payloads decodes the payloads of raw batches on its own goroutine, in
// order. The producer sends on in and closes it; the consumer receives on
// out until it is closed and hands batches back with recycle. After a
// payload that does not decode, the batch holding the events before it
// carries the error, and the rest of in is drained unread, so the producer
// never blocks on a failed stage.
type payloads struct {
	in      chan *rawBatch
	rawFree chan *rawBatch
	out     chan *batch
	free    chan *batch
	quit    <-chan struct{} // closed when the consumer is gone; nil: it drains out to the end
	done    chan struct{}
}

func startPayloads(quit <-chan struct{}) *payloads {
	p := &payloads{
		in: make(chan *rawBatch, batchesAhead), rawFree: make(chan *rawBatch, batchesAhead+2),
		out: make(chan *batch, batchesAhead), free: make(chan *batch, batchesAhead+2),
		quit: quit, done: make(chan struct{}),
	}
	go p.run()
	return p
}

func (p *payloads) run() {
	defer close(p.done)
	defer close(p.out)
	dec := events.NewDecoder() // shares repeated strings across the fold
	failed := false
	for rb := range p.in {
		if failed {
			p.recycleRaw(rb)
			continue
		}
		b := p.batch()
		for i := range rb.recs {
			ev, err := projections.FromLogWith(dec, &rb.recs[i])
			if err != nil {
				b.err = err
				break
			}
			b.evs = append(b.evs, owned(dec, ev))
		}
		if b.err == nil {
			b.err = rb.err
		}
		failed = b.err != nil
		p.recycleRaw(rb)
		select {
		case p.out <- b:
		case <-p.quit:
			for rb := range p.in { // the producer closes in once it sees quit too
				p.recycleRaw(rb)
			}
			return
		}
	}
}

// owned is ev with envelope strings of its own: ev's alias its raw
// batch's buffer, which is reused once the batch is decoded. The payload
// already owns its memory (events.Decoder copies what it decodes).
func owned(dec *events.Decoder, ev events.Event) events.Event {
	for _, s := range [...]*string{&ev.Stream, &ev.Type, &ev.CommandID, &ev.CausationID, &ev.CorrelationID, &ev.Actor.Role, &ev.Actor.TaskID} {
		*s = dec.Intern(*s)
	}
	return ev
}

// rawBatch returns an empty raw batch, a decoded one when there is one.
func (p *payloads) rawBatch() *rawBatch {
	select {
	case rb := <-p.rawFree:
		rb.recs, rb.buf, rb.err = rb.recs[:0], rb.buf[:0], nil
		return rb
	default:
		return &rawBatch{recs: make([]eventlog.Event, 0, batchSize)}
	}
}

func (p *payloads) recycleRaw(rb *rawBatch) {
	select {
	case p.rawFree <- rb:
	default:
	}
}

// batch returns an empty batch, a folded one when there is one.
func (p *payloads) batch() *batch {
	select {
	case b := <-p.free:
		clear(b.evs) // NB: drop the payload pointers, so folded events are not kept alive by the pool
		b.evs, b.err = b.evs[:0], nil
		return b
	default:
		return &batch{evs: make([]events.Event, 0, batchSize)}
	}
}

// recycle hands a folded batch back to the decoder.
func (p *payloads) recycle(b *batch) {
	select {
	case p.free <- b:
	default:
	}
}

// decoder reads the log on one goroutine and decodes its payloads on
// another.
type decoder struct {
	*payloads
	quit chan struct{} // closed by stop: the reader returns
	done chan struct{} // closed when the reader has returned
}

// decode starts reading l from position from; stopAt reports the first
// record not to decode (nil: read to the durable head).
func decode(l *eventlog.Log, from uint64, stopAt func(r *eventlog.Event) bool) *decoder {
	quit := make(chan struct{})
	d := &decoder{payloads: startPayloads(quit), quit: quit, done: make(chan struct{})}
	go d.run(l, from, stopAt)
	return d
}

func (d *decoder) run(l *eventlog.Log, from uint64, stopAt func(r *eventlog.Event) bool) {
	defer close(d.done)
	defer close(d.in)
	it := l.ReadTransient(from)
	defer it.Close()
	rb := d.rawBatch()
	send := func() bool {
		select {
		case d.in <- rb:
			rb = d.rawBatch()
			return true
		case <-d.quit:
			return false
		}
	}
	for it.Next() {
		r := it.Event()
		if stopAt != nil && stopAt(r) {
			break
		}
		if rb.add(r); len(rb.recs) == batchSize && !send() {
			return
		}
	}
	rb.err = it.Close()
	send()
}

// stop ends the reader and the decoder (if they are still running) and
// waits for them, so the log's iterator is closed before the caller may
// close the log.
func (d *decoder) stop() {
	close(d.quit)
	<-d.done
	<-d.payloads.done
}
