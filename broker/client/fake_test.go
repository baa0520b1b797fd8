package client

import (
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/brokertest"
	"github.com/crewlog/crewlog/broker/wire"
)

// fakeBroker is a minimal broker for the client's tests: it speaks the framing and the hello, and hands every
// later request to the test's handler, so the client is tested without the server package.
//
// Handlers run on the broker's goroutines, never the test's: they report a failure with errorf, and the
// broker's cleanup asserts, on the test goroutine, that none was reported.
type fakeBroker struct {
	t    testing.TB
	path string
	ln   net.Listener

	// hello decides the hello (nil error: accept). It runs before the ack is written.
	hello func(params json.RawMessage) *wire.Error
	// handle answers one request; it runs on the connection's reading goroutine, in arrival order.
	handle func(fc *fakeConn, req wire.Request)

	mu    sync.Mutex
	conns []*fakeConn
	errs  []error // what a handler reported, asserted by the cleanup
	wg    sync.WaitGroup
}

// errorf records a failure seen on a broker goroutine.
func (b *fakeBroker) errorf(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.errs = append(b.errs, fmt.Errorf(format, args...))
}

type fakeConn struct {
	b    *fakeBroker
	conn net.Conn
	mu   sync.Mutex
}

func (fc *fakeConn) send(v any) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	// A write to a client that has gone is not the test's failure.
	_ = wire.WriteFrame(fc.conn, v, wire.MaxFrameCeiling)
}

func (fc *fakeConn) reply(id string, result any) {
	raw, err := json.Marshal(result)
	if err != nil {
		fc.b.errorf("reply %s: %w", id, err)
		return
	}
	fc.send(wire.Response{ID: id, Result: raw})
}

func (fc *fakeConn) fail(id string, code wire.Code, msg string) {
	fc.send(wire.Response{ID: id, Error: wire.NewError(code, msg)})
}

func (fc *fakeConn) push(name string, seq uint64, data any) {
	raw, err := json.Marshal(data)
	if err != nil {
		fc.b.errorf("push %s: %w", name, err)
		return
	}
	fc.send(wire.Event{Name: name, Data: raw, Seq: seq})
}

func newFakeBroker(t testing.TB, handle func(fc *fakeConn, req wire.Request)) *fakeBroker {
	t.Helper()
	path := filepath.Join(brokertest.SocketDir(t), "b.sock")
	ln, err := net.Listen("unix", path)
	require.NoError(t, err)
	b := &fakeBroker{t: t, path: path, ln: ln, handle: handle}
	b.wg.Add(1)
	go b.accept()
	t.Cleanup(func() {
		b.stop()
		b.mu.Lock()
		defer b.mu.Unlock()
		require.Empty(t, b.errs, "the fake broker's handlers reported failures")
	})
	return b
}

func (b *fakeBroker) stop() {
	b.ln.Close()
	b.mu.Lock()
	for _, fc := range b.conns {
		fc.conn.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

func (b *fakeBroker) connCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.conns)
}

func (b *fakeBroker) accept() {
	defer b.wg.Done()
	for {
		conn, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.mu.Lock()
		fc := &fakeConn{b: b, conn: conn}
		b.conns = append(b.conns, fc)
		b.mu.Unlock()
		b.wg.Add(1)
		go b.serve(fc)
	}
}

func (b *fakeBroker) serve(fc *fakeConn) {
	defer b.wg.Done()
	defer fc.conn.Close()
	r := wire.NewReader(fc.conn, wire.MaxFrameCeiling)
	authed := false
	for {
		frame, err := r.ReadFrame()
		if err != nil {
			return
		}
		req, err := wire.DecodeRequest(frame)
		if err != nil {
			return
		}
		if !authed {
			if req.Method != wire.MethodHello {
				fc.fail(req.ID, wire.CodeProtocol, wire.MsgHelloRequired)
				return
			}
			if b.hello != nil {
				if e := b.hello(req.Params); e != nil {
					fc.send(wire.Response{ID: req.ID, Error: e})
					return
				}
			}
			var h struct {
				RunID string `json:"runId"`
			}
			_ = json.Unmarshal(req.Params, &h)
			fc.reply(req.ID, wire.HelloAck{Protocol: 1, Session: "fake", Run: h.RunID, OK: true})
			authed = true
			continue
		}
		b.handle(fc, req)
	}
}
