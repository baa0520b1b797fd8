package audit

import (
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// Replay splits the work over two goroutines: one reads the log and decodes
// payloads (storage scan, record and payload decode: about half the cost),
// the other folds (projections.Apply and what the options ask for). Batches
// travel in log order over a bounded channel, so the fold sees exactly the
// sequence a single loop would: the result is the same, only sooner.

const (
	// batchSize events per hand-over: channel operations cost nothing next
	// to decoding that many payloads.
	batchSize = 256
	// batchesAhead bounds how far decoding runs ahead of the fold, and with
	// it the memory held by decoded, unfolded events.
	batchesAhead = 8
)

// batch is a run of decoded events; err, on the last batch, ends the stream.
type batch struct {
	evs []events.Event
	err error
}

// decoder reads and decodes the log on its own goroutine.
type decoder struct {
	out  chan *batch
	free chan *batch   // folded batches, for reuse
	quit chan struct{} // closed by stop: the reader returns
	done chan struct{} // closed when the reader has returned
}

// decode starts reading l from position from; stopAt reports the first
// record not to decode (nil: read to the durable head).
func decode(l *eventlog.Log, from uint64, stopAt func(r *eventlog.Event) bool) *decoder {
	d := &decoder{
		out:  make(chan *batch, batchesAhead),
		free: make(chan *batch, batchesAhead+2),
		quit: make(chan struct{}),
		done: make(chan struct{}),
	}
	go d.run(l, from, stopAt)
	return d
}

func (d *decoder) run(l *eventlog.Log, from uint64, stopAt func(r *eventlog.Event) bool) {
	defer close(d.done)
	defer close(d.out)
	it := l.Read(from)
	dec := events.NewDecoder()
	b := d.batch()
	send := func() bool {
		select {
		case d.out <- b:
			b = d.batch()
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
		ev, err := projections.FromLogWith(dec, r)
		if err != nil {
			it.Close()
			b.err = err
			send()
			return
		}
		if b.evs = append(b.evs, ev); len(b.evs) == batchSize && !send() {
			it.Close()
			return
		}
	}
	b.err = it.Close()
	send()
}

// batch returns an empty batch, a folded one when there is one.
func (d *decoder) batch() *batch {
	select {
	case b := <-d.free:
		clear(b.evs) // NB: drop the payload pointers, so folded events are not kept alive by the pool
		b.evs, b.err = b.evs[:0], nil
		return b
	default:
		return &batch{evs: make([]events.Event, 0, batchSize)}
	}
}

// recycle hands a folded batch back to the reader.
func (d *decoder) recycle(b *batch) {
	select {
	case d.free <- b:
	default:
	}
}

// stop ends the reader (if it is still running) and waits for it, so the
// log's iterator is closed before the caller may close the log.
func (d *decoder) stop() {
	close(d.quit)
	<-d.done
}
