package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crewlog/crewlog/broker"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/projections"
)

// Stream pacing and bounds.
const (
	// streamBatchBytes bounds the frames one write carries (at least one frame); the client has writeTimeout to
	// take them (deadlines.go).
	streamBatchBytes = 256 << 10
	// streamCoalesce is the least time between two writes to one stream: a dashboard gets its events in batches
	// of up to this age, and 50 dashboards cost the daemon a few hundred writes a second, not one per commit each.
	streamCoalesce = 100 * time.Millisecond
	// catchUpEvents bounds the events one read of a catch-up takes from the log.
	catchUpEvents = 256
)

// streamRetry is a stream's first line: EventSource's reconnection time, 2 s, which the browser waits before it
// reconnects (with Last-Event-ID) to a stream that ended without a resync: crewd restarting, the connection lost.
const streamRetry = "retry: 2000\n\n"

// streamLimits counts open streams, in total and per principal.
type streamLimits struct {
	mu          sync.Mutex
	total       int
	per         map[string]int
	max, maxPer int
	resyncs     atomic.Uint64
	hub         hub
	closed      bool           // set by shut: no stream opens after it
	active      sync.WaitGroup // open streams; shut waits for them, so none reads the log once Close returns
}

func (l *streamLimits) init(o Options) {
	l.per = make(map[string]int)
	l.max, l.maxPer = o.MaxStreams, o.MaxStreamsPerPrincipal
}

func (l *streamLimits) acquire(key string) *apiError {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return stopping()
	}
	if l.total >= l.max {
		return errorf(http.StatusTooManyRequests, codeTooManyStreams, "too many open streams (limit %d)", l.max)
	}
	if l.per[key] >= l.maxPer {
		return errorf(http.StatusTooManyRequests, codeTooManyStreams, "too many open streams for this credential (limit %d)", l.maxPer)
	}
	l.total++
	l.per[key]++
	l.active.Add(1)
	return nil
}

func (l *streamLimits) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if l.per[key]--; l.per[key] <= 0 {
		delete(l.per, key)
	}
	l.active.Done()
}

// shut refuses new streams and waits for the open ones to end (Close has closed quit, which ends them; a stream
// blocked writing to a stalled client ends within writeTimeout).
func (l *streamLimits) shut() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.active.Wait()
}

// open is the number of open streams.
func (l *streamLimits) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

type helloData struct {
	Head uint64 `json:"head"`
	Run  string `json:"run,omitempty"`
	// After is the position the stream starts after.
	After uint64 `json:"after"`
}

// GET /api/v1/stream?run=ID&type=T…&after=POSITION (or Last-Event-ID: POSITION)
func (s *Server) handleStream(w http.ResponseWriter, r *http.Request, pr principal) {
	// NB: opening a stream is a read as any other (takingTurns): a paced credential's waits for its bucket before
	// anything is done for it, holding no stream's place and keeping no connection's (one waiting here is closed to
	// make room as an answered one is), and costs one unit, answered or refused; its reads cost what they read
	// (serve). A credential that went while it waited opens nothing. NB: the hub's end ends the wait, as it ends a
	// stream's: the opening is refused below at once, rather than once its debt (hours) is paid. NB: held long,
	// whether it waits or streams: it ends when its client goes, requests pipelined behind it or not (clientwatch.go).
	holdLong(r.Context())
	if !s.awaitPaceTicking(r.Context(), &pr, nil, nil, s.streams.hub.stopped) {
		return
	}
	// NB: the server's Close ends the wait as it ends a read's: refused as a request that comes now is, where it
	// opened a stream, hello and all, that ended at once.
	if e := s.refusalAfterWait(&pr); e != nil {
		writeError(w, e)
		return
	}
	s.chargeStream(pr.key, 1)
	p := newParams(r.URL)
	runID := p.str("run", maxIDLen)
	types := typeSet(p.strs("type", broker.MaxTypeFilter, broker.MaxTypeLen))
	afterParam := p.str("after", 20)
	p.str(proofParam, maxSecretLen) // NB: read by authenticate
	if e := p.strict(); e != nil {
		writeError(w, e)
		return
	}
	head := s.opts.Engine.Head()
	after := head
	for _, v := range []string{afterParam, r.Header.Get("Last-Event-ID")} {
		if v == "" {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeError(w, badParams("after and Last-Event-ID must be a log position, got %q", v))
			return
		}
		after = min(n, head)
	}
	if runID != "" {
		var e *apiError
		s.opts.Engine.Read(func(st *projections.State) { e = runFound(st, runID) })
		if e != nil {
			writeError(w, e)
			return
		}
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		writeError(w, errorf(http.StatusInternalServerError, codeInternal, "streaming is not supported here"))
		return
	}
	h := &s.streams.hub
	if h.down() {
		// NB: refused, not opened and ended with a resync: a client reconnects after a resync (the page at once),
		// and would loop; EventSource gives up on a 503. A stream that opens as the hub fails ends in serve.
		writeError(w, errorf(http.StatusServiceUnavailable, codeUnavailable, "the live stream is down: crewd %s "+
			"after an error (its log says which); the other routes still answer, and a restart of crewd brings "+
			"the stream back", hubStopped))
		return
	}
	if e := s.streams.acquire(pr.key); e != nil {
		writeError(w, e)
		return
	}
	defer s.streams.release(pr.key)
	keepPlace(r) // NB: bounded by MaxStreams and MaxStreamsPerPrincipal, below MaxConns
	first := h.join()
	defer h.leave()

	// A stream that starts inside the ring is live at once; an older start catches up from the log first.
	st := &sseStream{s: s, w: w, fl: fl, rc: http.NewResponseController(w), run: runID, types: types, cursor: after,
		live: after+1 >= first}
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	hello, _ := jsonBytes(helloData{Head: head, Run: runID, After: after})
	if !st.write([]byte(streamRetry), []byte("event: hello\ndata: "+string(hello)+"\n\n")) {
		return
	}
	st.serve(r, pr)
}

// sseStream is one client's stream: its filter, its cursor (the last position sent or skipped) and its writes.
type sseStream struct {
	s     *Server
	w     http.ResponseWriter
	fl    http.Flusher
	rc    *http.ResponseController
	run   string
	types map[string]bool
	// cursor is the last position delivered or filtered out: the stream resumes after it.
	cursor uint64
	// live is set once the stream reads from the hub's ring; from then on falling out of it is a resync.
	live bool
}

func (st *sseStream) keep(run, typ string) bool {
	return (st.run == "" || run == st.run) && (st.types == nil || st.types[typ])
}

// serve writes events until the client goes, the server closes, pr's credential is revoked or its session
// expires, or a resync ends the stream.
func (st *sseStream) serve(r *http.Request, pr principal) {
	s, h := st.s, &st.s.streams.hub
	// ctx ends when the client goes or the server closes: every wait of the stream's (for a catch-up turn, the
	// ring, a keep-alive, pacing) ends with it.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-s.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	keepAlive, stopKeepAlive := s.keepAliveTicker()
	defer stopKeepAlive()
	var lastWrite time.Time
	for {
		// NB: a paced credential's stream reads nothing, of the log or of the ring, while its token owes: it sends
		// its keep-alive meanwhile, however long the debt, so that neither a proxy nor its client takes it for dead.
		// The hub's end ends the wait: the take below finds it down and sends the resync, rather than the stream
		// holding its place for the rest of its debt (minutes) to learn that it will never be sent an event again.
		if !s.awaitPaceTicking(ctx, &pr, keepAlive, st.keepAlive, h.stopped) {
			return
		}
		// NB: checked before every write, a catch-up's too (it writes without waiting on anything): a stream opened
		// with a credential sends nothing once the credential would no longer open it.
		if ctx.Err() != nil || s.closeBegun() || !s.current(&pr) {
			return
		}
		frames, next, read, lag, wait, inRing := h.take(st.cursor, st.run, st.keep, streamBatchBytes)
		switch {
		case !inRing && h.down():
			// Live or replaying, the stream could only wait for a hub that will never wake it.
			st.resync("crewd " + hubStopped + " after an error")
			return
		case !inRing && st.live:
			st.resync("the stream fell out of the server's buffer")
			return
		case !inRing:
			// Older than the ring: read the log directly (a resumed or long-behind stream).
			ok, err := st.catchUp(ctx, &pr)
			if err != nil {
				s.opts.Logger.Error("httpapi: stream catch-up failed; sending resync", "err", err)
				st.resync("the server could not read the log")
				return
			}
			if !ok {
				return
			}
			continue
		case lag > uint64(s.opts.StreamBytes):
			st.resync("client fell behind its byte budget")
			return
		}
		st.live = true
		if len(frames) > 0 {
			if wait := streamCoalesce - s.coalesceNow().Sub(lastWrite); wait > 0 {
				// NB: pacing, not synchronisation: batch what arrives in the meantime into fewer writes.
				select {
				case <-s.coalesceAfter(wait):
				case <-ctx.Done():
					return
				}
				continue // take again: more may have arrived
			}
		}
		// NB: the hub read them once for every stream; this one is charged what it read of that read: the events of
		// its run it looked at, sent or left out by its type filter, as its replay is charged those it read of the
		// log and a subscription on the socket every event of its run it reads, so a filter that keeps little does
		// not have the token's streams look at every event crewd writes for free.
		s.chargeStream(pr.key, read)
		if len(frames) > 0 {
			if !st.write(frames...) {
				return
			}
			lastWrite = s.coalesceNow()
		}
		st.cursor = next
		if len(frames) > 0 {
			continue // the batch may have stopped at streamBatchBytes
		}
		if !st.await(ctx, &pr, wait, keepAlive) {
			return
		}
	}
}

// await waits, with nothing to send, for the hub's next events (wait), or for the stream's next keep-alive, which
// it sends; false means the stream ends: its client went, the server is closing, or pr no longer authenticates,
// which it looks at every credentialRecheck meanwhile (Server.recheck), without going back to the hub, so that a
// revoked token's or an expired session's stream gives back its place and its connection's then, not at its next
// keep-alive or event, which may be long in coming. A credential that cannot end (canEnd) is not looked at.
func (st *sseStream) await(ctx context.Context, pr *principal, wait <-chan struct{}, keepAlive <-chan time.Time) bool {
	looks := pr.canEnd() // NB: a bearer stays a bearer and a session a session: asked once
	for {
		var recheck <-chan struct{}
		if looks {
			recheck = st.s.recheck.wait()
		}
		select {
		case <-wait:
			return true
		case <-keepAlive:
			// NB: a keep-alive is a write too: a stream whose credential went gets not even that.
			return st.s.current(pr) && st.keepAlive()
		case <-recheck:
			if !st.s.current(pr) {
				return false
			}
		case <-ctx.Done():
			return false
		}
	}
}

// catchUp sends, from the log, up to catchUpEvents events after the cursor that the ring does not hold, in one
// write of at most streamBatchBytes of frames (at least one frame), as the ring's batches; false means the client
// is gone, the server is closing or pr's credential no longer holds. The cursor moves past the events sent and
// those filtered out, never past the one left for the next batch. The log is read during one of the credential's
// catch-up turns, given back before the write (catchupturns.go), once a paced credential's bucket holds a unit
// (serve waits for it: pacing.go): the events read are charged to it, as a subscription's are on the socket, so a
// filter that keeps nothing, which writes nothing, does not let a token read the log as fast as a core can.
func (st *sseStream) catchUp(ctx context.Context, pr *principal) (bool, error) {
	done, ok := st.s.catchUpTurn(ctx, pr)
	if !ok {
		return false, nil
	}
	var frames [][]byte
	var next uint64
	var read int
	var err error
	func() {
		defer done() // NB: given back even if the read panics (the server recovers a handler and serves on)
		frames, next, read, err = st.readLog(pr.key)
	}()
	st.s.chargeStream(pr.key, read)
	if err != nil {
		return false, err
	}
	if len(frames) > 0 && !st.write(frames...) {
		return false, nil
	}
	st.cursor = next
	return true, nil
}

// readLog reads catchUp's batch: its frames, the cursor after them and the events it read, the one past the head or
// left for the next batch (read, and rendered, again then) included.
func (st *sseStream) readLog(key string) (frames [][]byte, next uint64, read int, err error) {
	head := st.s.opts.Engine.Head()
	if st.s.catchingUp != nil {
		st.s.catchingUp(key)
	}
	var it *eventlog.Iterator
	if st.run != "" {
		from, err := versionAfter(st.s.opts.Log, st.run, st.cursor)
		if err != nil {
			return nil, 0, 0, err
		}
		it = st.s.opts.Log.ReadStream(st.run, from)
	} else {
		it = st.s.opts.Log.Read(st.cursor + 1)
	}
	defer it.Close()
	next, n, size := st.cursor, 0, 0
	for n < catchUpEvents && it.Next() {
		read++
		rec := it.Event()
		if rec.Position > head {
			break
		}
		if !st.keep(rec.Stream, rec.Type) {
			n++
			next = rec.Position
			continue
		}
		f, err := eventFrame(rec)
		if err != nil {
			return nil, 0, read, err
		}
		if size > 0 && size+len(f) > streamBatchBytes {
			break // the next batch starts with it
		}
		n++
		next = rec.Position
		frames = append(frames, f)
		size += len(f)
	}
	if err := it.Close(); err != nil {
		return nil, 0, read, err
	}
	if n == 0 {
		// Nothing of the stream's in the log after the cursor up to the head read above: move to that head, and no
		// further. NB: not to where the hub's ring starts, even when it starts later: the hub may have dropped from
		// its ring, since that head was read, events published after it that this stream keeps; they are in the
		// log only, and the next read finds them there.
		next = max(st.cursor, head)
	}
	return frames, next, read, nil
}

// write sends frames and flushes; false means the client is gone (or stalled past writeTimeout).
func (st *sseStream) write(frames ...[]byte) bool {
	st.rc.SetWriteDeadline(time.Now().Add(st.s.writeTimeout))
	for _, f := range frames {
		if _, err := st.w.Write(f); err != nil {
			return false
		}
	}
	return st.rc.Flush() == nil
}

// keepAlive sends the stream's keep-alive comment; false means the client is gone.
func (st *sseStream) keepAlive() bool { return st.write([]byte(": keep-alive\n\n")) }

// keepAliveTicker ticks every Options.KeepAlive for a stream's keep-alives, or as the test's hook keepAliveTicks does;
// stop ends it.
func (s *Server) keepAliveTicker() (ticks <-chan time.Time, stop func()) {
	if s.keepAliveTicks != nil {
		return s.keepAliveTicks(s.opts.KeepAlive)
	}
	t := time.NewTicker(s.opts.KeepAlive)
	return t.C, t.Stop
}

// hubStopped says, in a stream's resync and refusal, that the hub stopped on an error (hub.fail).
const hubStopped = "stopped following the log for the streams"

// resync sends the one resync event; the stream then ends.
func (st *sseStream) resync(reason string) {
	st.s.streams.resyncs.Add(1)
	data, _ := jsonBytes(map[string]any{"fromPosition": st.cursor + 1, "reason": reason})
	st.write([]byte(fmt.Sprintf("event: resync\ndata: %s\n\n", data)))
}
