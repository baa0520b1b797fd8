package broker

import (
	"sync"
)

// outbound is one connection's queue of encoded frames, drained by its writer goroutine. It is what keeps a slow
// client from slowing anyone else: producers (the reader answering requests, the subscription, the mailbox feed)
// only ever append to it, and only the connection's writer blocks on the socket.
//
// Bounds: at most limit frames of the ordinary kinds. Beyond that:
//   - a push (team.event, mailbox.message) is refused at once — the subscription then queues a resync and stops;
//   - a response waits for room (back-pressure on the connection's own reader and waiters only);
//   - a control frame (resync) and the final frame (an error that closes the connection) are always accepted:
//     each subscription queues at most one resync and a connection one final frame, so the excess is bounded.
//
// After the final frame nothing more is accepted; the writer closes the connection once it has written it.
//
// Concurrency: every method is safe for concurrent use.
type outbound struct {
	mu     sync.Mutex
	frames [][]byte
	limit  int
	final  bool        // the final frame is queued
	reason closeReason // why the connection closes after the final frame
	closed bool        // the connection is closed: drop everything
	ready  chan struct{}
	space  chan struct{} // closed and replaced whenever the writer takes frames
}

func newOutbound(limit int) *outbound {
	return &outbound{limit: limit, ready: make(chan struct{}, 1), space: make(chan struct{})}
}

func (q *outbound) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// tryPush queues a push frame if there is room; false means it was not queued (queue full or connection closing).
func (q *outbound) tryPush(f []byte) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || q.final || len(q.frames) >= q.limit {
		return false
	}
	q.frames = append(q.frames, f)
	q.signal()
	return true
}

// pushWait queues a response, waiting while the queue is full. It gives up (false) when the connection closes.
func (q *outbound) pushWait(f []byte, done <-chan struct{}) bool {
	for {
		q.mu.Lock()
		if q.closed || q.final {
			q.mu.Unlock()
			return false
		}
		if len(q.frames) < q.limit {
			q.frames = append(q.frames, f)
			q.signal()
			q.mu.Unlock()
			return true
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

// pushControl queues a frame regardless of the limit (the resync frame).
func (q *outbound) pushControl(f []byte) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || q.final {
		return false
	}
	q.frames = append(q.frames, f)
	q.signal()
	return true
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
	q.frames = append(q.frames, f)
	q.signal()
	return true
}

// take waits for frames and returns all of them. final is set when the batch ends with the final frame; ok is
// false when the connection closed first.
func (q *outbound) take(buf [][]byte, done <-chan struct{}) (frames [][]byte, final bool, reason closeReason, ok bool) {
	for {
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			return nil, false, 0, false
		}
		if len(q.frames) > 0 {
			frames = append(buf[:0], q.frames...)
			clear(q.frames)
			q.frames = q.frames[:0]
			close(q.space)
			q.space = make(chan struct{})
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

// close drops queued frames and refuses new ones.
func (q *outbound) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.frames = nil
}
