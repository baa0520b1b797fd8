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
// VerifyOptions.Visit) and copied here, and the payload stage hands on
// strings it owns, so a recycled batch frees nothing for the collector. A
// rawRecord holds no pointer, so filling a batch costs no write barrier
// either.
type rawBatch struct {
	recs []rawRecord
	buf  []byte
	err  error
}

// rawRecord is a record whose strings and payload are spans of its batch's
// buffer: field i runs from ends[i-1] (start, for the first) to ends[i],
// in the order of envelopeStrings, the payload last.
type rawRecord struct {
	position, streamVersion uint64
	time                    int64
	schemaVersion           uint16
	start                   int
	ends                    [rawStrings + 1]int
}

// rawStrings is how many strings an envelope has.
const rawStrings = 7

// envelopeStrings are r's envelope strings in the order a rawRecord keeps them.
func envelopeStrings(r *eventlog.Event) [rawStrings]string {
	return [...]string{r.Stream, r.Type, r.CommandID, r.CausationID, r.CorrelationID, r.ActorRole, r.ActorTask}
}

// add appends a copy of r.
func (rb *rawBatch) add(r *eventlog.Event) {
	rec := rawRecord{position: r.Position, streamVersion: r.StreamVersion, time: r.Time,
		schemaVersion: r.SchemaVersion, start: len(rb.buf)}
	for i, s := range envelopeStrings(r) {
		rb.buf = append(rb.buf, s...)
		rec.ends[i] = len(rb.buf)
	}
	rb.buf = append(rb.buf, r.Payload...)
	rec.ends[rawStrings] = len(rb.buf)
	rb.recs = append(rb.recs, rec)
}

// event returns record i with envelope strings of its own (in's) and its
// payload still in the batch's buffer: valid until the batch is recycled.
func (rb *rawBatch) event(i int, in *interner) eventlog.Event {
	rec := &rb.recs[i]
	var s [rawStrings]string
	from := rec.start
	for f := range s {
		s[f] = in.string(f, rb.buf[from:rec.ends[f]])
		from = rec.ends[f]
	}
	return eventlog.Event{
		Position: rec.position, Stream: s[0], StreamVersion: rec.streamVersion, Type: s[1],
		SchemaVersion: rec.schemaVersion, Time: rec.time, CommandID: s[2], CausationID: s[3], CorrelationID: s[4],
		ActorRole: s[5], ActorTask: s[6], Payload: rb.buf[from:rec.ends[rawStrings]:rec.ends[rawStrings]],
	}
}

// interner turns envelope fields into strings of their own: the previous
// record's when equal (a command's events come together, with the same
// run, command and actor), else the decoder's shared one.
type interner struct {
	dec  *events.Decoder
	prev [rawStrings]string
}

func (in *interner) string(field int, b []byte) string {
	if string(b) == in.prev[field] { // NB: a comparison, not a conversion: no allocation
		return in.prev[field]
	}
	var s string
	if len(b) > 0 {
		s = in.dec.Intern(unsafe.String(&b[0], len(b)))
	}
	in.prev[field] = s
	return s
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
	in := &interner{dec: dec}
	failed := false
	for rb := range p.in {
		if failed {
			p.recycleRaw(rb)
			continue
		}
		b := p.batch()
		for i := range rb.recs {
			r := rb.event(i, in)
			ev, err := projections.FromLogWith(dec, &r)
			if err != nil {
				b.err = err
				break
			}
			b.evs = append(b.evs, ev)
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

// rawBatch returns an empty raw batch, a decoded one when there is one.
func (p *payloads) rawBatch() *rawBatch {
	select {
	case rb := <-p.rawFree:
		rb.recs, rb.buf, rb.err = rb.recs[:0], rb.buf[:0], nil
		return rb
	default:
		return &rawBatch{recs: make([]rawRecord, 0, batchSize)}
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

// decode starts reading l from position from up to and including
// position to (0: to the durable head), and before the first record whose
// time is later than latest (unix nanoseconds). NB: the reader stops at to
// rather than at the first record past it, which it would have to read, and
// so check, first: a replay up to a damaged record's predecessor succeeds.
// The first record later than latest is read and checked (its time says
// where to stop), but its payload is not decoded: a replay up to a time
// before an event of a newer build succeeds.
func decode(l *eventlog.Log, from, to uint64, latest int64) *decoder {
	quit := make(chan struct{})
	d := &decoder{payloads: startPayloads(quit), quit: quit, done: make(chan struct{})}
	go d.run(l, from, to, latest)
	return d
}

func (d *decoder) run(l *eventlog.Log, from, to uint64, latest int64) {
	defer close(d.done)
	defer close(d.in)
	// NB: chained, so a replay names a record whose checksum holds but whose
	// hash does not follow its predecessor's, as verify does, instead of
	// folding it.
	it := l.ReadChainedTransient(from)
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
	// NB: a stop before from reads nothing; else the loop ends at to (below) or at the durable head.
	if to == 0 || from <= to {
		for it.Next() {
			r := it.Event()
			if r.Time > latest {
				break
			}
			if rb.add(r); len(rb.recs) == batchSize && !send() {
				return
			}
			if r.Position == to {
				break
			}
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
