package httpapi

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crewlog/crewlog/eventlog"
)

// hub follows the log for every stream at once: one goroutine reads each newly published event, renders its SSE
// frame once, and appends it to a ring that every live stream reads from its own cursor. So N dashboards cost one
// log read and one render per event, plus N copies to sockets, and the memory of the ring, whatever N is.
//
// The ring holds the frames of the newest events, contiguous positions [first, next), at most ringBytes of them
// (older ones are dropped first). A stream whose cursor falls out of the ring, or whose unsent bytes exceed its
// budget, gets its resync (stream.go). With no stream open the hub renders nothing: it only keeps its place.
type hub struct {
	s         *Server
	ringBytes int

	mu      sync.Mutex
	entries []frameEntry // positions first, first+1, …, next-1
	first   uint64
	next    uint64 // the next position to read from the log
	bytes   int    // frame bytes held
	total   uint64 // frame bytes ever appended (a stream's lag is a difference of two totals)
	streams int    // open streams; 0: idle
	notify  chan struct{}
	failed  bool // follow stopped on an error: the ring will never be appended to again (fail)

	stopped chan struct{} // closed when follow has returned: no log iterator of the hub is open after it

	// pulling is a test's hook: it runs at the start of every pull (a panic there fails the hub). Atomic, so a
	// test may set it while the hub follows, and a pull pays one load for it.
	pulling atomic.Pointer[func()]
}

// frameEntry is one event's SSE frame, with what a stream filters on.
type frameEntry struct {
	pos   uint64
	run   string
	typ   string
	frame []byte
	cum   uint64 // total after this entry
}

// hubCoalesce is the least time between two reads of the log by the hub: under a write load the engine publishes
// a group every few hundred microseconds, and a dashboard needs no more than a few updates a second.
const hubCoalesce = 20 * time.Millisecond

func (h *hub) init(s *Server) {
	h.s = s
	h.ringBytes = 2 * s.opts.StreamBytes
	h.notify = make(chan struct{})
	h.stopped = make(chan struct{})
}

// start places the hub at the published head and follows the engine until the server closes.
func (h *hub) start() {
	head := h.s.opts.Engine.Head()
	h.mu.Lock()
	h.first, h.next = head+1, head+1
	h.mu.Unlock()
	go h.follow()
}

func (h *hub) follow() {
	defer close(h.stopped)
	defer func() {
		if v := recover(); v != nil {
			eventlog.RepanicFatal(v) // the store answers nothing more: the process exits
			h.s.opts.Logger.Error("httpapi: stream hub panicked; streams end", "panic", v)
			h.fail()
		}
	}()
	for {
		changed := h.s.opts.Engine.Changed() // taken before reading, so a publish after the read still wakes us
		if err := h.pull(); err != nil {
			h.s.opts.Logger.Error("httpapi: stream hub cannot read the log; streams end", "err", err)
			h.fail()
			return
		}
		select {
		case <-changed:
		case <-h.s.quit:
			return
		}
		select {
		case <-time.After(hubCoalesce):
		case <-h.s.quit:
			return
		}
	}
}

// fail drops the ring and stops following: every stream's cursor is then out of it, so each ends with a resync
// that says so, and no stream opens after it (handleStream): the hub would never wake one again.
func (h *hub) fail() {
	h.mu.Lock()
	h.failed = true
	h.entries, h.bytes, h.first = nil, 0, ^uint64(0)
	close(h.notify)
	h.notify = make(chan struct{})
	h.mu.Unlock()
}

// pull appends the frames of the events published since the last pull.
func (h *hub) pull() error {
	if hook := h.pulling.Load(); hook != nil {
		(*hook)()
	}
	head := h.s.opts.Engine.Head()
	h.mu.Lock()
	from, idle := h.next, h.streams == 0
	if idle {
		clear(h.entries)
		h.entries, h.bytes, h.first, h.next = h.entries[:0], 0, head+1, head+1
	}
	h.mu.Unlock()
	if idle || from > head {
		return nil
	}
	it := h.s.opts.Log.Read(from)
	defer it.Close()
	batch := make([]frameEntry, 0, 64)
	flush := func() {
		h.mu.Lock()
		for _, e := range batch {
			h.total += uint64(len(e.frame))
			e.cum = h.total
			h.entries = append(h.entries, e)
			h.bytes += len(e.frame)
			h.next = e.pos + 1
		}
		drop := 0
		for h.bytes > h.ringBytes && drop < len(h.entries)-1 {
			h.bytes -= len(h.entries[drop].frame)
			h.entries[drop] = frameEntry{}
			drop++
		}
		if drop > 0 {
			h.entries = h.entries[drop:]
			h.first = h.entries[0].pos
		}
		close(h.notify)
		h.notify = make(chan struct{})
		h.mu.Unlock()
		batch = batch[:0]
	}
	for it.Next() {
		rec := it.Event()
		if rec.Position > head {
			break
		}
		f, err := eventFrame(rec)
		if err != nil {
			return err
		}
		batch = append(batch, frameEntry{pos: rec.Position, run: rec.Stream, typ: rec.Type, frame: f})
		if len(batch) == cap(batch) {
			flush()
		}
	}
	if len(batch) > 0 {
		flush()
	}
	return it.Close()
}

// eventFrame is rec as one SSE frame: id = position, event = type, data = the API's event JSON.
func eventFrame(rec *eventlog.Event) ([]byte, error) {
	data, err := eventJSON(rec)
	if err != nil {
		return nil, err
	}
	f := make([]byte, 0, len(data)+len(rec.Type)+48)
	f = fmt.Appendf(f, "id: %d\nevent: %s\ndata: ", rec.Position, rec.Type)
	f = append(f, data...)
	return append(f, '\n', '\n'), nil
}

// down reports whether the hub stopped on an error (fail).
func (h *hub) down() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.failed
}

// join counts an open stream and returns the first position the ring will hold for it: events before it are read
// from the log by the stream itself.
func (h *hub) join() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.streams++
	close(h.notify) // NB: a spurious wake-up for the streams; lets a test wait for a join
	h.notify = make(chan struct{})
	return h.first
}

func (h *hub) leave() {
	h.mu.Lock()
	h.streams--
	h.mu.Unlock()
}

// take copies the frames after cursor that pass keep, at most maxBytes of them (at least one), and returns them
// with the new cursor (the last position looked at), the events looked at of run's (every run's, run empty), sent
// or left out by keep: what a stream of run reads of the ring (read), the bytes published after cursor that are not
// yet sent (lag), the channel closed at the next append, and whether cursor is still in the ring (evicted false;
// always false once the hub failed, whatever the cursor).
func (h *hub) take(cursor uint64, run string, keep func(run, typ string) bool, maxBytes int) (frames [][]byte,
	next uint64, read int, lag uint64, wait <-chan struct{}, inRing bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	next, wait = cursor, h.notify
	if h.failed || cursor+1 < h.first {
		return nil, cursor, 0, 0, wait, false
	}
	i := int(cursor + 1 - h.first)
	if i >= len(h.entries) {
		return nil, cursor, 0, 0, wait, true
	}
	lag = h.total - (h.entries[i].cum - uint64(len(h.entries[i].frame)))
	size := 0
	for ; i < len(h.entries); i++ {
		e := h.entries[i]
		if keep(e.run, e.typ) {
			if size > 0 && size+len(e.frame) > maxBytes {
				break
			}
			frames = append(frames, e.frame)
			size += len(e.frame)
		}
		if run == "" || e.run == run {
			read++
		}
		next = e.pos
	}
	return frames, next, read, lag, wait, true
}
