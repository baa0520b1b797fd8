package integration

import (
	"encoding/json"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/brokertest"
	"github.com/crewlog/crewlog/broker/client"
	"github.com/crewlog/crewlog/broker/wire"
)

// closingBroker speaks the wire protocol on a unix socket and answers each request with answer(method, commandId,
// attempt); a close answer also closes the connection, as crewd does when it closes one under a request.
type closingBroker struct {
	socket string
	mu     sync.Mutex
	sent   map[string]int // attempts per method and commandId
	answer func(method, commandID string, attempt int) *wire.Error
}

func newClosingBroker(t *testing.T, answer func(method, commandID string, attempt int) *wire.Error) *closingBroker {
	b := &closingBroker{socket: filepath.Join(brokertest.SocketDir(t), "b.sock"), sent: map[string]int{}, answer: answer}
	ln, err := net.Listen("unix", b.socket)
	require.NoError(t, err)
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); b.serve(conn) }()
		}
	}()
	return b
}

func (b *closingBroker) serve(conn net.Conn) {
	defer conn.Close()
	r := wire.NewReader(conn, wire.MaxFrameCeiling)
	for {
		frame, err := r.ReadFrame()
		if err != nil {
			return
		}
		req, err := wire.DecodeRequest(frame)
		if err != nil {
			return
		}
		if req.Method == wire.MethodHello {
			ack, _ := json.Marshal(wire.HelloAck{Protocol: 1, Session: "fake", OK: true})
			_ = wire.WriteFrame(conn, wire.Response{ID: req.ID, Result: ack}, wire.MaxFrameCeiling)
			continue
		}
		var p struct {
			CommandID string `json:"commandId"`
		}
		_ = json.Unmarshal(req.Params, &p)
		b.mu.Lock()
		key := req.Method + " " + p.CommandID
		b.sent[key]++
		attempt := b.sent[key]
		b.mu.Unlock()
		if e := b.answer(req.Method, p.CommandID, attempt); e != nil {
			_ = wire.WriteFrame(conn, wire.Response{ID: req.ID, Error: e}, wire.MaxFrameCeiling)
			if e.Code == wire.CodeClose {
				return
			}
			continue
		}
		_ = wire.WriteFrame(conn, wire.Response{ID: req.ID, Result: json.RawMessage(`{"chargedTokens":3}`)}, wire.MaxFrameCeiling)
	}
}

// A write answered close (crewd closed the connection before answering it) has an unknown outcome: the client sends
// it again with its commandId and the operation is recorded with the retried answer, its interval spanning both
// attempts. A first version recorded the close answer as the settle's final outcome, a refusal that changed nothing.
func TestJepsenRetriesWriteAnsweredClose(t *testing.T) {
	b := newClosingBroker(t, func(method, _ string, attempt int) *wire.Error {
		if attempt == 1 {
			return wire.NewError(wire.CodeClose, "connection closing")
		}
		return nil
	})
	ctx := testContext(t, time.Minute)
	n := &jepsenNode{d: &daemon{t: t, socket: b.socket}, gens: newGenerations()}
	j := newJepsen(t, jepsenConfig{}, []*jepsenNode{n}, newGate())
	s := j.session(n, client.Hello{Role: "admin", Token: "x"}, nil)
	defer s.close()

	out, err := j.do(ctx, s, 0, opInput{Kind: opSettle, Run: "r", Sub: "gc-1", Tokens: 3}, "delegate.settle",
		map[string]any{"subId": "gc-1", "commandId": "s-gc-1"}, answer(func(r struct {
			ChargedTokens int64 `json:"chargedTokens"`
		}, o *opOutput) {
			o.Charged = r.ChargedTokens
		}))
	require.NoError(t, err)
	require.True(t, out.ok(), "the retried answer is the outcome, not close: %+v", out)
	require.Equal(t, int64(3), out.Charged)
	require.Equal(t, 2, b.sent["delegate.settle s-gc-1"], "sent again with the same commandId")
	ops := j.hist.snapshot()
	require.Len(t, ops, 1)
	require.Equal(t, 2, ops[0].Metadata.(opMeta).Attempts)
	require.Equal(t, int64(1), n.gens.lost.Load(), "counted as an answer lost and retried")

	// A read answered close keeps that answer: the model reads a wait answered close as saying nothing.
	out, err = j.do(ctx, s, 0, opInput{Kind: opWait, Run: "r", Sub: "gc-1"}, "task.waitStatus", map[string]any{"taskId": "gc-1"}, nil)
	require.NoError(t, err)
	require.Equal(t, closing, out.Code)
}

// A write answered close with no commandId cannot be retried: it is recorded as unknown (info), an operation that
// never returns, and the model lets it have happened or not.
func TestJepsenRecordsUnknownWrite(t *testing.T) {
	b := newClosingBroker(t, func(string, string, int) *wire.Error { return wire.NewError(wire.CodeClose, "connection closing") })
	ctx := testContext(t, time.Minute)
	n := &jepsenNode{d: &daemon{t: t, socket: b.socket}, gens: newGenerations()}
	j := newJepsen(t, jepsenConfig{}, []*jepsenNode{n}, newGate())
	s := j.session(n, client.Hello{Role: "admin", Token: "x"}, nil)
	defer s.close()
	out, err := j.do(ctx, s, 0, opInput{Kind: opUsage, Run: "r", Task: "w0", Tokens: 5}, "task.usage", map[string]any{"taskId": "w0"}, nil)
	require.NoError(t, err)
	require.Equal(t, unknownOutcome, out.Code)
	ops := j.hist.snapshot()
	require.Len(t, ops, 1)
	require.Equal(t, unknownOutcome, ops[0].Output.(opOutput).Code)
	require.Greater(t, ops[0].Return, int64(time.Hour), "its interval never ends")
	_, err = j.do(ctx, s, 0, opInput{Kind: opAdmit, Run: "r", Task: "w0"}, "delegate.request", map[string]any{}, nil)
	require.ErrorContains(t, err, "cannot be modelled")
}
