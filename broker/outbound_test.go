package broker

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
)

func frameOf(n int) []byte { return bytes.Repeat([]byte("x"), n) }

// TestOutboundBytesCountTheBatchBeingWritten: a connection's budget counts what its writer has taken but not yet
// written; the bytes come back only when the write completes.
func TestOutboundBytesCountTheBatchBeingWritten(t *testing.T) {
	global := &outboundBudget{limit: 1 << 20}
	q := newOutbound(256, 100, global)
	require.True(t, q.tryPush(frameOf(60)))
	require.False(t, q.tryPush(frameOf(60)), "60+60 bytes exceed the connection's 100")
	frames, _, _, ok := q.take(nil, nil)
	require.True(t, ok)
	require.Len(t, frames, 1)
	require.False(t, q.tryPush(frameOf(60)), "the batch being written still counts")
	require.Equal(t, int64(60), global.used.Load())
	q.written(60)
	require.Zero(t, global.used.Load())
	require.True(t, q.tryPush(frameOf(60)))
}

// TestOutboundGlobalBudget: the daemon-wide budget refuses a push that fits its connection's own budget; an
// empty connection still takes one frame; closing a connection gives its bytes back.
func TestOutboundGlobalBudget(t *testing.T) {
	global := &outboundBudget{limit: 150}
	a, b, c := newOutbound(256, 100, global), newOutbound(256, 100, global), newOutbound(256, 100, global)
	require.True(t, a.tryPush(frameOf(60)))
	require.True(t, b.tryPush(frameOf(60)))
	require.False(t, a.tryPush(frameOf(40)), "a holds 100 ≤ its 100, but everyone would hold 160 > 150")
	require.True(t, c.tryPush(frameOf(90)), "a connection holding nothing always takes one frame")
	require.Equal(t, int64(210), global.used.Load())
	require.True(t, a.pushControl(frameOf(10)), "the resync frame ignores the budgets")
	a.close()
	b.close()
	c.close()
	require.Zero(t, global.used.Load(), "closed connections hold nothing")
}

// TestOutboundCredentialBudget: a credential's budget refuses a push that fits its connection's and the daemon's;
// a push the daemon's budget refuses takes nothing from the credential's; the bytes a connection held before its
// hello count once it is bound; closing gives every byte back.
func TestOutboundCredentialBudget(t *testing.T) {
	global, cred := &outboundBudget{limit: 1000}, &outboundBudget{limit: 150}
	a, b := newOutbound(256, 100, global), newOutbound(256, 100, global)
	require.True(t, a.tryPush(frameOf(60)))
	a.share(cred)
	b.share(cred)
	require.Equal(t, int64(60), cred.used.Load(), "held before the hello, counted after")
	require.True(t, b.tryPush(frameOf(60)))
	require.True(t, b.tryPush(frameOf(30)))
	require.False(t, a.tryPush(frameOf(20)), "a holds 80 ≤ its 100, but its credential would hold 170 > 150")
	cred.limit, global.limit = 300, 150
	require.False(t, a.tryPush(frameOf(20)), "refused by the daemon's budget")
	require.Equal(t, int64(150), cred.used.Load(), "and nothing taken from the credential's")
	a.close()
	b.close()
	require.Zero(t, cred.used.Load())
	require.Zero(t, global.used.Load())
}

// TestOutboundLeaveGivesBackABudgetsBytes: a connection that leaves a budget gives back what it holds of it, the
// batch being written included, and counts nothing more against it, while it goes on counting against the others;
// its write and its close then give back nothing twice.
func TestOutboundLeaveGivesBackABudgetsBytes(t *testing.T) {
	global, cred, run := &outboundBudget{limit: 1000}, &outboundBudget{limit: 1000}, &outboundBudget{limit: 1000}
	q := newOutbound(256, 500, global)
	q.share(cred)
	q.share(run)
	require.True(t, q.tryPush(frameOf(60)))
	_, _, _, ok := q.take(nil, nil)
	require.True(t, ok)
	require.True(t, q.tryPush(frameOf(40)))

	q.leave(cred)
	require.Zero(t, cred.used.Load(), "what it held of the budget it left")
	require.Equal(t, int64(100), run.used.Load())
	require.True(t, q.tryPush(frameOf(30)))
	require.Zero(t, cred.used.Load(), "a push after it left")
	q.written(60)
	require.Zero(t, cred.used.Load())
	require.Equal(t, int64(70), run.used.Load())
	require.Equal(t, int64(70), global.used.Load())
	q.leave(cred) // not among its budgets any more
	q.close()
	for _, b := range []*outboundBudget{global, cred, run} {
		require.Zero(t, b.used.Load())
	}
}

// TestOutboundRunBudget: the connections of two credentials of one run share its budget too: it refuses a push
// that fits their connections', their credentials' and the daemon's budgets, and takes nothing from any of them;
// closing gives every byte back.
func TestOutboundRunBudget(t *testing.T) {
	global, run := &outboundBudget{limit: 1000}, &outboundBudget{limit: 170}
	credA, credB := &outboundBudget{limit: 100}, &outboundBudget{limit: 100}
	a, b := newOutbound(256, 100, global), newOutbound(256, 100, global)
	a.share(credA)
	a.share(run)
	b.share(credB)
	b.share(run)
	for _, q := range []*outbound{a, a, b, b} {
		require.True(t, q.tryPush(frameOf(40)))
	}
	require.False(t, b.tryPush(frameOf(40)), "b's credential would hold 120 > 100")
	require.False(t, a.tryPush(frameOf(20)), "a's credential would hold 100, but their run 180 > 170")
	for _, held := range []struct {
		budget *outboundBudget
		want   int64
	}{{global, 160}, {credA, 80}, {credB, 80}, {run, 160}} {
		require.Equal(t, held.want, held.budget.used.Load(), "the refusals took nothing")
	}
	a.close()
	b.close()
	for _, bg := range []*outboundBudget{global, credA, credB, run} {
		require.Zero(t, bg.used.Load(), "closed connections hold nothing")
	}
}

// TestOutboundAnswerIsRenderedOnlyWithRoom: a reader waits for room before it reads its next request while its
// connection is over a bound (frames, its bytes, a budget's), until its writer has written; the answer it then
// renders always goes in, counted against every budget even beyond them, never held outside them; a closing
// connection ends the wait.
func TestOutboundAnswerIsRenderedOnlyWithRoom(t *testing.T) {
	tests := []struct {
		name            string
		limit, maxBytes int
		budget          int64
	}{
		{"frames", 1, 1 << 20, 1 << 20},
		{"connection's bytes", 256, 80, 1 << 20},
		{"a budget's bytes", 256, 1 << 20, 80},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			global := &outboundBudget{limit: 1 << 20}
			cred := &outboundBudget{limit: tc.budget}
			q := newOutbound(tc.limit, tc.maxBytes, global)
			q.share(cred)
			require.True(t, q.tryPush(frameOf(80)), "a connection holding nothing takes one frame")
			room := make(chan bool)
			go func() { room <- q.awaitRoom(nil) }()
			require.Eventually(t, func() bool {
				q.mu.Lock()
				defer q.mu.Unlock()
				return q.space != nil
			}, guard, time.Millisecond, "the reader does not wait for room while over a bound")
			select {
			case <-room:
				require.FailNow(t, "room while over a bound")
			default:
			}
			frames, _, _, _ := q.take(nil, nil)
			q.written(len(frames[0]))
			require.True(t, recv(t, room, "return from the wait for room"), "the writer's write makes room")

			require.True(t, q.tryPush(frameOf(80)))
			require.True(t, q.pushResponse(frameOf(90)), "an answer goes in beyond the bounds")
			for _, b := range []*outboundBudget{global, cred} {
				require.Equal(t, int64(170), b.used.Load(), "the answer beyond the bounds is counted")
			}
			done := make(chan struct{})
			go func() { room <- q.awaitRoom(done) }()
			close(done)
			require.False(t, recv(t, room, "return from the wait for room"), "a closing connection ends the wait")
			q.close()
			require.Zero(t, global.used.Load()+cred.used.Load(), "closed connections hold nothing")
			require.False(t, q.pushResponse(frameOf(10)), "a closed connection takes no answer")
		})
	}
}

// TestOutboundClaimIsTheOnlyWriter: a response is written directly only by a claim on a connection with nothing
// queued or being written; while it is, the writer takes nothing (frames never interleave) and the response's
// bytes count; its release hands what was queued meanwhile to the writer.
func TestOutboundClaimIsTheOnlyWriter(t *testing.T) {
	global := &outboundBudget{limit: 1 << 20}
	q := newOutbound(256, 100, global)
	ok, closing := q.claim(frameOf(30))
	require.True(t, ok)
	require.False(t, closing)
	require.Equal(t, int64(30), global.used.Load(), "the response being written counts")
	ok, _ = q.claim(frameOf(10))
	require.False(t, ok, "one writer at a time")
	require.True(t, q.tryPush(frameOf(20)))

	gaveUp := make(chan struct{})
	close(gaveUp)
	_, _, _, took := q.take(nil, gaveUp)
	require.False(t, took, "the writer takes nothing while a response is being written")
	q.release(30)
	frames, _, _, took := q.take(nil, nil)
	require.True(t, took)
	require.Len(t, frames, 1, "release hands the queued push to the writer")
	ok, _ = q.claim(frameOf(10))
	require.False(t, ok, "the writer's batch is being written")
	q.written(20)
	require.Zero(t, global.used.Load())

	require.True(t, q.pushFinal(frameOf(5), reasonAuth))
	_, closing = q.claim(frameOf(10))
	require.True(t, closing, "nothing after the final frame")
}

// TestACommandsAnswerIsFramedInTheReadersBuffer: the reader frames a command's answer in a buffer of its own, reused
// from one answer to the next, so an answer written at once allocates nothing; an answer that must wait in the queue
// (a push is there before it) is queued as a copy of its own, which the next answer framed in the buffer leaves
// alone.
func TestACommandsAnswerIsFramedInTheReadersBuffer(t *testing.T) {
	b, client := socketPair(t)
	s := &Server{opts: Options{MaxFrame: wire.DefaultMaxFrame}, requests: newRequestCounts()}
	c := &conn{s: s, nc: b, out: newOutbound(256, 1<<20, &outboundBudget{limit: 1 << 30}),
		w: newSocketWriter(b, time.Second)}
	go func() {
		buf := make([]byte, 64<<10)
		for {
			if _, err := client.Read(buf); err != nil {
				return
			}
		}
	}()
	raw := json.RawMessage(`{"ok":true,"subId":"s1","status":"completed"}`)
	require.True(t, c.answerCommand("r-17", "delegate.settle", raw))
	require.Zero(t, testing.AllocsPerRun(100, func() {
		if !c.answerCommand("r-17", "delegate.settle", raw) {
			panic("closing")
		}
	}))

	require.True(t, c.out.tryPush([]byte("{\"event\":\"x\",\"data\":null,\"seq\":0}\n")))
	require.True(t, c.answerCommand("r-18", "delegate.settle", raw))
	require.True(t, c.answerCommand("r-19", "delegate.settle", json.RawMessage(`{"ok":false}`)))
	frames, _, _, ok := c.out.take(nil, nil)
	require.True(t, ok)
	require.Len(t, frames, 3)
	require.Equal(t, `{"id":"r-18","result":`+string(raw)+"}\n", string(frames[1]), "the queued answer is its own")
	require.Equal(t, `{"id":"r-19","result":{"ok":false}}`+"\n", string(frames[2]))
}

// TestOutboundBoundsHoldBothSides: each bound of a connection's queue (its frames, its bytes, the daemon's budget,
// its credential's) takes a push that brings the connection exactly to it, and refuses one that would take it a byte
// or a frame past it, taking nothing from any budget. Its reader has room for its next request (hasRoom) below every
// bound, and none exactly at one.
func TestOutboundBoundsHoldBothSides(t *testing.T) {
	const big = 1 << 20
	for _, tc := range []struct {
		name            string
		limit, maxBytes int
		global, cred    int64
		pushes          []int // the last one brings the connection to the bound (fits) or past it
		fits            bool
	}{
		{"the connection's bytes, at", 256, 100, big, big, []int{60, 40}, true},
		{"the connection's bytes, past", 256, 100, big, big, []int{60, 41}, false},
		{"the daemon's budget, at", 256, big, 100, big, []int{60, 40}, true},
		{"the daemon's budget, past", 256, big, 100, big, []int{60, 41}, false},
		{"the credential's budget, at", 256, big, big, 100, []int{60, 40}, true},
		{"the credential's budget, past", 256, big, big, 100, []int{60, 41}, false},
		{"the connection's frames, at", 3, big, big, big, []int{60, 1, 1}, true},
		{"the connection's frames, past", 3, big, big, big, []int{60, 1, 1, 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			global, cred := &outboundBudget{limit: tc.global}, &outboundBudget{limit: tc.cred}
			q := newOutbound(tc.limit, tc.maxBytes, global)
			q.share(cred)
			hasRoom := func() bool {
				q.mu.Lock()
				defer q.mu.Unlock()
				return q.hasRoom()
			}
			var held int64
			last := len(tc.pushes) - 1
			for i, n := range tc.pushes[:last] {
				require.True(t, q.tryPush(frameOf(n)), "push %d is within every bound", i)
				held += int64(n)
			}
			if tc.fits {
				require.True(t, hasRoom(), "below every bound, the reader has room")
				require.True(t, q.tryPush(frameOf(tc.pushes[last])), "a push that brings it to the bound fits")
				held += int64(tc.pushes[last])
				require.False(t, hasRoom(), "at the bound, the reader waits for room")
			} else {
				require.False(t, q.tryPush(frameOf(tc.pushes[last])), "a push past the bound is refused")
			}
			for _, b := range []*outboundBudget{global, cred} {
				require.Equal(t, held, b.used.Load(), "the budgets count what was taken, a refusal nothing")
			}
			q.close()
			require.Zero(t, global.used.Load()+cred.used.Load(), "a closed connection holds nothing")
		})
	}
}

// TestOutboundAnEndingConnectionTakesNoPush: once a connection is ending (endPushes), neither a push nor a resync
// frame is queued, nor counted, while the answer of the request its reader serves and the final frame still are.
func TestOutboundAnEndingConnectionTakesNoPush(t *testing.T) {
	global := &outboundBudget{limit: 1 << 20}
	q := newOutbound(256, 1<<10, global)
	q.endPushes()
	require.True(t, q.pushesEnded())
	require.False(t, q.tryPush(frameOf(10)), "a push")
	require.False(t, q.pushControl(frameOf(10)), "a resync frame")
	require.Zero(t, global.used.Load(), "neither is counted")
	require.True(t, q.pushResponse(frameOf(20)), "the answer of the request being served")
	require.True(t, q.pushFinal(frameOf(30), reasonEnded), "the final frame")
	frames, final, reason, ok := q.take(nil, nil)
	require.True(t, ok)
	require.True(t, final)
	require.Equal(t, reasonEnded, reason)
	require.Equal(t, [][]byte{frameOf(20), frameOf(30)}, frames)
	q.close()
	require.Zero(t, global.used.Load())
}
