package broker

import (
	"slices"
	"sync"
	"sync/atomic"
)

// outbound is one connection's queue of encoded frames, drained by its writer goroutine. It is what keeps a slow
// client from slowing anyone else: pushes (the subscription, the mailbox feed) only ever append to it, and only
// the connection's own goroutines block on its socket. One goroutine at a time writes to the socket: the writer
// with the batch it took, or a goroutine answering a request (the reader, a waiter) with its response, which it may
// write itself (claim) when nothing is queued or being written, sparing the hand-off to the writer.
//
// Bounds, in frames and in bytes. The bytes a connection holds are those queued plus the batch (or response) being
// written: they are released only when the write has completed. An ordinary frame fits when the connection
// holds nothing, or when it keeps the connection within limit frames queued, within maxBytes held, and its
// credential's budget, its run's and the daemon-wide budget within their limits. Beyond that:
//   - a push (team.event, mailbox.message) is refused at once — the subscription then queues a resync and stops;
//   - a response always goes in, beyond the bounds when it does not fit, counted against every budget all the
//     same: it is never held outside them. What bounds it is that the reader reads its next request only once the
//     connection is within its bounds (awaitRoom: back-pressure on the connection's own reader only; its own writer
//     finishing a write is what makes room, since an empty connection always takes one frame), so that a
//     connection holds at most one answer of its reader beyond them, on top of the frame it took holding nothing;
//     a task.waitStatus answer, a task's status, goes in without waiting, as its waits are bounded
//     (MaxWaitsPerConn, MaxWaitsPerCredential);
//   - a control frame (resync) and the final frame (an error that closes the connection) are always accepted:
//     each subscription queues at most one resync and a connection one final frame, so the excess is bounded.
//
// After the final frame nothing more is accepted; the writer closes the connection once it has written it. A
// connection that is ending (endPushes) takes no more pushes even before its final frame is queued.
//
// Concurrency: every method is safe for concurrent use.
type outbound struct {
	mu       sync.Mutex
	frames   [][]byte
	limit    int
	maxBytes int
	held     int // bytes queued plus bytes of the batch being written
	// budgets are what held counts against: the daemon's, then, from its hello on, its credential's (none for the
	// admin) and its run's (a worker's only): share. nil after the last.
	budgets  [maxBudgets]*outboundBudget
	busy     bool        // a goroutine writes the socket: the writer its batch, or a responder its response (claim)
	final    bool        // the final frame is queued
	noPushes bool        // the connection is ending: pushes are refused, responses still taken (endPushes)
	reason   closeReason // why the connection closes after the final frame
	closed   bool        // the connection is closed: drop everything
	ready    chan struct{}
	space    chan struct{} // made by a reader waiting for room (awaitRoom), closed (and dropped) when the writer makes room
}

// maxBudgets is the most budgets a connection's bytes count against: the daemon's, its credential's, its run's.
const maxBudgets = 3

// outboundBudget counts the bytes held by a set of outbound queues: the daemon's (every connection's), one
// credential's (its connections') or one run's (its workers' connections').
type outboundBudget struct {
	used  atomic.Int64
	limit int64
	conns int // the connections counting against a credential's or a run's, under the server's mu (joinBudget)
}

func (b *outboundBudget) limitTo(n int64) { b.limit = n }
func (b *outboundBudget) joined() *int    { return &b.conns }

// reserve counts n bytes if they fit within the limit.
func (b *outboundBudget) reserve(n int) bool {
	for {
		u := b.used.Load()
		if u+int64(n) > b.limit {
			return false
		}
		if b.used.CompareAndSwap(u, u+int64(n)) {
			return true
		}
	}
}

func newOutbound(limit, maxBytes int, global *outboundBudget) *outbound {
	return &outbound{limit: limit, maxBytes: maxBytes, budgets: [maxBudgets]*outboundBudget{global},
		ready: make(chan struct{}, 1)}
}

// roomMade wakes the reader waiting for room, with q.mu held.
func (q *outbound) roomMade() {
	if q.space != nil {
		close(q.space)
		q.space = nil
	}
}

func (q *outbound) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// share counts the connection's bytes, from now on and those it holds, against b too: its credential's budget or
// its run's.
func (q *outbound) share(b *outboundBudget) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	i := slices.Index(q.budgets[:], nil)
	if i < 0 {
		panic("broker: a connection counts against more than maxBudgets budgets")
	}
	q.budgets[i] = b
	b.used.Add(int64(q.held))
}

// leave stops counting the connection's bytes against b, giving back those it holds of it: its credential's budget
// or its run's, as its credential ends (Server.giveBackEnded). Nothing to do for a budget it does not count against.
func (q *outbound) leave(b *outboundBudget) {
	q.mu.Lock()
	defer q.mu.Unlock()
	i := slices.Index(q.budgets[:], b)
	if b == nil || q.closed || i < 0 {
		return
	}
	b.used.Add(-int64(q.held))
	// NB: the others move up, so that the budgets are the first ones, nil after the last.
	copy(q.budgets[i:], q.budgets[i+1:])
	q.budgets[len(q.budgets)-1] = nil
}

// admit counts f against the bounds if it fits, with q.mu held.
func (q *outbound) admit(f []byte) bool {
	if q.held == 0 { // a connection may always hold one frame, whatever the budgets
		q.force(f)
		return true
	}
	if len(q.frames) >= q.limit || q.held+len(f) > q.maxBytes {
		return false
	}
	for i, b := range q.budgets {
		if b == nil {
			break
		}
		if !b.reserve(len(f)) {
			for _, r := range q.budgets[:i] {
				r.used.Add(-int64(len(f)))
			}
			return false
		}
	}
	q.held += len(f)
	return true
}

// force counts f without checking the bounds (control and final frames), with q.mu held.
func (q *outbound) force(f []byte) {
	q.held += len(f)
	q.count(len(f))
}

// count adds n bytes (released: negative) to the budgets the connection counts against, with q.mu held.
func (q *outbound) count(n int) {
	for _, b := range q.budgets {
		if b == nil {
			break
		}
		b.used.Add(int64(n))
	}
}

// tryPush queues a push frame if it fits; false means it was not queued (over a bound, or connection closing).
func (q *outbound) tryPush(f []byte) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || q.final || q.noPushes || !q.admit(f) {
		return false
	}
	q.frames = append(q.frames, f)
	q.signal()
	return true
}

// endPushes refuses every later push (tryPush, pushControl) while responses and the final frame are still taken:
// the connection is ending, and its final frame waits for the answer of the request its reader serves.
func (q *outbound) endPushes() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.noPushes = true
}

// pushesEnded reports whether endPushes was called.
func (q *outbound) pushesEnded() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.noPushes
}

// awaitRoom waits until the connection is within its bounds (hasRoom), so that its reader may read, and render the
// answer to, its next request: false means the connection closed first. NB: the answer is rendered only once there is
// room for it, never to wait for room with its frame held outside every budget (pushResponse).
func (q *outbound) awaitRoom(done <-chan struct{}) bool {
	for {
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			return false
		}
		if q.final || q.hasRoom() { // NB: after the final frame the answer is refused, not waited for
			q.mu.Unlock()
			return true
		}
		if q.space == nil {
			q.space = make(chan struct{})
		}
		space := q.space
		q.mu.Unlock()
		select {
		case <-space:
		case <-done:
			return false
		}
	}
}

// hasRoom reports whether the connection is within its bounds: it holds nothing, or fewer frames than its limit,
// fewer bytes than maxBytes, and every budget it counts against is under its limit; with q.mu held.
func (q *outbound) hasRoom() bool {
	if q.held == 0 {
		return true
	}
	if len(q.frames) >= q.limit || q.held >= q.maxBytes {
		return false
	}
	for _, b := range q.budgets {
		if b == nil {
			break
		}
		if b.used.Load() >= b.limit {
			return false
		}
	}
	return true
}

// pushControl queues a frame regardless of the bounds (the resync frame).
func (q *outbound) pushControl(f []byte) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || q.final || q.noPushes {
		return false
	}
	q.enqueueForced(f)
	return true
}

// pushResponse queues a response regardless of the bounds and of endPushes; false means the connection is closing.
// Beyond the bounds it is counted all the same, as the control frames are, and it never waits: its reader rendered it
// only once the connection had room (awaitRoom), so no frame a responder holds is one the budgets do not count. The
// hello's answer comes this way too, before any push may be queued.
func (q *outbound) pushResponse(f []byte) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || q.final {
		return false
	}
	q.enqueueForced(f)
	return true
}

// enqueueForced queues f regardless of the bounds, with q.mu held.
func (q *outbound) enqueueForced(f []byte) {
	q.force(f)
	q.frames = append(q.frames, f)
	q.signal()
}

// pushFinal queues the last frame the connection will carry; the writer closes the connection with reason after
// writing it. Only the first final frame counts.
func (q *outbound) pushFinal(f []byte, reason closeReason) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || q.final {
		return false
	}
	q.final, q.reason = true, reason
	q.enqueueForced(f)
	return true
}

// take waits for frames and returns all of them; their bytes stay held until the writer calls written. final is
// set when the batch ends with the final frame; ok is false when the connection closed first.
func (q *outbound) take(buf [][]byte, done <-chan struct{}) (
	frames [][]byte, final bool, reason closeReason, ok bool) {
	for {
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			return nil, false, 0, false
		}
		if len(q.frames) > 0 && !q.busy {
			q.busy = true
			frames = append(buf[:0], q.frames...)
			clear(q.frames)
			q.frames = q.frames[:0]
			// The frame count bounds what is queued, so room for frames opens now; bytes open at written.
			q.roomMade()
			final, reason = q.final, q.reason
			q.mu.Unlock()
			return frames, final, reason, true
		}
		q.mu.Unlock()
		select {
		case <-q.ready:
		case <-done:
			return nil, false, 0, false
		}
	}
}

// written releases the bytes of a batch whose write has completed.
func (q *outbound) written(n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.busy = false
	if q.closed {
		return // close released everything
	}
	q.held -= n
	q.count(-n)
	q.roomMade()
}

// claim lets the caller write response f to the socket itself, sparing the hand-off to the writer, when the
// connection has nothing queued and nothing being written: f then counts as held, and the socket is the caller's
// until it calls release. ok is false when f must be queued instead (pushResponse); closing when the connection takes
// no more frames.
func (q *outbound) claim(f []byte) (ok, closing bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.closed || q.final:
		return false, true
	case q.busy || len(q.frames) > 0:
		return false, false
	}
	q.busy = true
	q.force(f) // NB: held is 0 here: a connection holding nothing always takes one frame
	return true, false
}

// release ends a write of n bytes that claim allowed, and hands the socket to the writer for what was queued
// meanwhile.
func (q *outbound) release(n int) {
	q.written(n)
	q.mu.Lock()
	if len(q.frames) > 0 {
		q.signal()
	}
	q.mu.Unlock()
}

// close drops queued frames, releases every byte the connection held and refuses new frames.
func (q *outbound) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	q.closed = true
	q.frames = nil
	q.count(-q.held)
	q.held = 0
}
