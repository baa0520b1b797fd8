package client

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
)

var worker = Hello{RunID: "r1", TaskID: "t1", Token: "secret-w"}

// testCtx bounds a test that would otherwise hang on a bug; it is not a timing assertion.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func dialT(t *testing.T, b *fakeBroker, h Hello, o *Options) *Client {
	t.Helper()
	c, err := Dial(testCtx(t), b.path, h, o)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func pingHandler() func(fc *fakeConn, req wire.Request) {
	return func(fc *fakeConn, req wire.Request) {
		switch req.Method {
		case wire.MethodPing:
			fc.reply(req.ID, map[string]any{"pong": true, "protocol": 1})
		default:
			fc.send(wire.Response{ID: req.ID, Error: wire.NotImplemented(req.Method)})
		}
	}
}

func TestHelloShapes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hello Hello
		want  string
	}{
		{"admin", Hello{Role: "admin", Token: "adm-secret"}, `{"protocol":1,"role":"admin","token":"adm-secret"}`},
		{"orchestrator", Hello{RunID: "r1", TaskID: "orchestrator", Token: "orch-secret"}, `{"protocol":1,"runId":"r1","taskId":"orchestrator","token":"orch-secret"}`},
		{"worker", worker, `{"protocol":1,"runId":"r1","taskId":"t1","token":"secret-w"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newFakeBroker(t, pingHandler())
			got := make(chan string, 1)
			b.hello = func(p json.RawMessage) *wire.Error { got <- string(p); return nil }
			c := dialT(t, b, tc.hello, nil)
			require.JSONEq(t, tc.want, <-got)
			require.Equal(t, wire.HelloAck{Protocol: 1, Session: "fake", Run: tc.hello.RunID, OK: true}, c.Ack())
			require.NotContains(t, tc.hello.String(), tc.hello.Token)
		})
	}
}

func TestDialRefused(t *testing.T) {
	b := newFakeBroker(t, pingHandler())
	b.hello = func(json.RawMessage) *wire.Error { return wire.NewError(wire.CodeAuth, wire.MsgHelloRejected) }
	_, err := Dial(testCtx(t), b.path, worker, nil)
	var we *wire.Error
	require.ErrorAs(t, err, &we)
	require.Equal(t, wire.CodeAuth, we.Code)
	require.True(t, strings.HasPrefix(err.Error(), "client: "), err.Error())
}

func TestDialFailures(t *testing.T) {
	t.Run("no socket", func(t *testing.T) {
		_, err := Dial(testCtx(t), filepath.Join(t.TempDir(), "none.sock"), worker, nil)
		require.ErrorContains(t, err, "client: connect")
	})
	t.Run("hello never answered", func(t *testing.T) {
		b := newFakeBroker(t, pingHandler())
		block := make(chan struct{})
		t.Cleanup(func() { close(block) })
		b.hello = func(json.RawMessage) *wire.Error { <-block; return nil }
		_, err := Dial(testCtx(t), b.path, worker, &Options{DialTimeout: 50 * time.Millisecond})
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
	t.Run("bad options", func(t *testing.T) {
		_, err := Dial(testCtx(t), "x", worker, &Options{MaxFrame: 10, DialTimeout: -1, EventBuffer: -1})
		require.ErrorContains(t, err, "max frame")
		require.ErrorContains(t, err, "dial timeout")
		require.ErrorContains(t, err, "event buffer")
	})
}

func TestCallResultAndErrorFrame(t *testing.T) {
	b := newFakeBroker(t, func(fc *fakeConn, req wire.Request) {
		if req.Method == "deny" {
			fc.fail(req.ID, wire.CodePolicyDenied, "slots exhausted")
			return
		}
		pingHandler()(fc, req)
	})
	c := dialT(t, b, worker, nil)
	var pong struct{ Pong bool }
	require.NoError(t, c.Call(testCtx(t), wire.MethodPing, nil, &pong))
	require.True(t, pong.Pong)

	err := c.Call(testCtx(t), "deny", map[string]any{"x": 1}, nil)
	var we *wire.Error
	require.ErrorAs(t, err, &we)
	require.Equal(t, wire.Error{Code: wire.CodePolicyDenied, Message: "slots exhausted"}, *we)
	require.NotErrorIs(t, err, ErrClosed)
	require.NoError(t, c.Err(), "an error frame leaves the connection up")
}

// TestCallConcurrentOutOfOrder answers 64 concurrent calls in the reverse of their arrival order: every caller
// must get its own answer.
func TestCallConcurrentOutOfOrder(t *testing.T) {
	const n = 64
	var mu sync.Mutex
	var held []wire.Request
	b := newFakeBroker(t, func(fc *fakeConn, req wire.Request) {
		mu.Lock()
		held = append(held, req)
		all := len(held) == n
		mu.Unlock()
		if !all {
			return
		}
		for i := n - 1; i >= 0; i-- {
			fc.send(wire.Response{ID: held[i].ID, Result: held[i].Params})
		}
	})
	c := dialT(t, b, worker, nil)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var got struct{ N int }
			if err := c.Call(testCtx(t), "echo", map[string]int{"n": i}, &got); err != nil {
				errs <- err
			} else if got.N != i {
				errs <- errors.New("wrong answer")
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

func TestCallRefusedLocally(t *testing.T) {
	b := newFakeBroker(t, pingHandler())
	c := dialT(t, b, worker, &Options{MaxFrame: 1024})
	ctx := testCtx(t)
	require.ErrorContains(t, c.Call(ctx, "no spaces", nil, nil), "client: method name")
	require.ErrorContains(t, c.Call(ctx, "x", make(chan int), nil), "encode params")
	err := c.Call(ctx, "x", strings.Repeat("a", 2000), nil)
	require.ErrorIs(t, err, wire.ErrFrameTooLarge)
	var we *wire.Error
	require.False(t, errors.As(err, &we), "a local refusal is not a broker error")
	require.NoError(t, c.Call(ctx, wire.MethodPing, nil, nil), "the connection survives local refusals")
}

func TestConnectionLostFailsPendingAndLater(t *testing.T) {
	b := newFakeBroker(t, func(fc *fakeConn, req wire.Request) { fc.conn.Close() })
	c := dialT(t, b, worker, nil)
	err := c.Call(testCtx(t), "anything", nil, nil)
	require.ErrorIs(t, err, ErrClosed)
	<-c.Done()
	require.ErrorIs(t, c.Err(), ErrClosed)
	require.ErrorIs(t, c.Call(testCtx(t), wire.MethodPing, nil, nil), ErrClosed)
}

// TestFinalFrameIsTheCause: an error frame that answers no request (id "") is the broker's reason for ending the
// connection; pending and later calls fail with ErrClosed carrying that error.
func TestFinalFrameIsTheCause(t *testing.T) {
	b := newFakeBroker(t, func(fc *fakeConn, req wire.Request) {
		fc.fail("", wire.CodeRevoked, wire.MsgTokenRevoked)
	})
	c := dialT(t, b, worker, nil)
	err := c.Call(testCtx(t), "anything", nil, nil)
	require.ErrorIs(t, err, ErrClosed)
	require.Equal(t, wire.CodeRevoked, wire.CodeOf(err))
	<-c.Done()
	require.Equal(t, wire.CodeRevoked, wire.CodeOf(c.Err()))
}

// TestFinalFrameIsTheCauseWhenAWriteFailsFirst: the broker writes its final frame and closes; a request written
// after the close fails with a broken pipe before the reader has read that frame (here the reader is held in
// OnMailbox, as a loaded machine may leave it unscheduled). The broker's error is still the cause.
func TestFinalFrameIsTheCauseWhenAWriteFailsFirst(t *testing.T) {
	closed := make(chan struct{})
	b := newFakeBroker(t, func(fc *fakeConn, req wire.Request) {
		if req.Method != "poke" {
			return
		}
		fc.push(wire.EventMailboxMessage, 0, map[string]string{"id": "m1"})
		fc.fail("", wire.CodeRevoked, wire.MsgTokenRevoked)
		fc.conn.Close()
		close(closed)
	})
	inMailbox, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	c := dialT(t, b, worker, &Options{OnMailbox: func(wire.Event) {
		close(inMailbox)
		<-release
	}})
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) }) // runs before the client's Close
	ctx := testCtx(t)

	_, _, err := c.start(ctx, "poke", nil)
	require.NoError(t, err)
	<-inMailbox
	<-closed
	_, _, err = c.start(ctx, wire.MethodPing, nil) // queued: the writer writes it into the closed socket
	require.NoError(t, err)
	<-c.writeDead
	require.ErrorIs(t, c.writeErr, syscall.EPIPE)
	releaseOnce.Do(func() { close(release) })

	<-c.Done()
	require.ErrorIs(t, c.Err(), ErrClosed)
	require.Equal(t, wire.CodeRevoked, wire.CodeOf(c.Err()), "%v", c.Err())
	err = c.Call(ctx, wire.MethodPing, nil, nil)
	require.Equal(t, wire.CodeRevoked, wire.CodeOf(err), "%v", err)
}

func TestOversizeFrameFromBrokerCloses(t *testing.T) {
	b := newFakeBroker(t, func(fc *fakeConn, req wire.Request) {
		fc.reply(req.ID, strings.Repeat("z", 4000))
	})
	c := dialT(t, b, worker, &Options{MaxFrame: 1024})
	err := c.Call(testCtx(t), "big", nil, nil)
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, err, wire.ErrFrameTooLarge)
}

func TestCallContextEndsThenLateAnswerIgnored(t *testing.T) {
	held := make(chan struct{})
	var slowID string // written and read on the connection's one handler goroutine
	b := newFakeBroker(t, func(fc *fakeConn, req wire.Request) {
		switch req.Method {
		case "slow":
			slowID = req.ID
			close(held)
		case wire.MethodPing:
			// Answer the abandoned request first: the client must drop it and still match the ping.
			fc.reply(slowID, "late")
			fc.reply(req.ID, map[string]bool{"pong": true})
		}
	})
	c := dialT(t, b, worker, nil)
	ctx, cancel := context.WithCancel(testCtx(t))
	go func() {
		<-held // the broker holds the request: give up waiting for it
		cancel()
	}()
	require.ErrorIs(t, c.Call(ctx, "slow", nil, nil), context.Canceled)
	var pong struct{ Pong bool }
	require.NoError(t, c.Call(testCtx(t), wire.MethodPing, nil, &pong))
	require.True(t, pong.Pong)
}

func TestMailboxPushesReachHandlerInOrder(t *testing.T) {
	b := newFakeBroker(t, func(fc *fakeConn, req wire.Request) {
		fc.push(wire.EventMailboxMessage, 0, map[string]string{"id": "m1", "body": "hi"})
		fc.push("some.future.push", 0, nil)
		fc.reply(req.ID, true)
	})
	var got []wire.Event
	c := dialT(t, b, worker, &Options{OnMailbox: func(ev wire.Event) { got = append(got, ev) }})
	require.NoError(t, c.Call(testCtx(t), "poke", nil, nil))
	// The reader handles frames in order, so the push was handled before the answer was delivered.
	require.Len(t, got, 1)
	require.Equal(t, wire.EventMailboxMessage, got[0].Name)
	require.JSONEq(t, `{"id":"m1","body":"hi"}`, string(got[0].Data))
}

func TestCloseIsIdempotent(t *testing.T) {
	b := newFakeBroker(t, pingHandler())
	c := dialT(t, b, worker, nil)
	require.NoError(t, c.Close())
	require.NoError(t, c.Close())
	require.ErrorIs(t, c.Call(testCtx(t), wire.MethodPing, nil, nil), ErrClosed)
}
