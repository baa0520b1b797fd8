package client

import (
	"encoding/json"
	"net"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
)

// fakeBroker is a minimal broker for the client's tests: it speaks the framing and the hello, and hands every
// later request to the test's handler, so the client is tested without the server package.
type fakeBroker struct {
	t    *testing.T
	path string
	ln   net.Listener

	// hello decides the hello (nil error: accept). It runs before the ack is written.
	hello func(params json.RawMessage) *wire.Error
	// handle answers one request; it runs on the connection's reading goroutine, in arrival order.
	handle func(fc *fakeConn, req wire.Request)

	mu    sync.Mutex
	conns []*fakeConn
	wg    sync.WaitGroup
}

type fakeConn struct {
	conn net.Conn
	mu   sync.Mutex
}

func (fc *fakeConn) send(t *testing.T, v any) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	// A write to a client that has gone is not the test's failure.
	_ = wire.WriteFrame(fc.conn, v, wire.MaxFrameCeiling)
}

func (fc *fakeConn) reply(t *testing.T, id string, result any) {
	raw, err := json.Marshal(result)
	require.NoError(t, err)
	fc.send(t, wire.Response{ID: id, Result: raw})
}

func (fc *fakeConn) fail(t *testing.T, id string, code wire.Code, msg string) {
	fc.send(t, wire.Response{ID: id, Error: wire.NewError(code, msg)})
}

func (fc *fakeConn) push(t *testing.T, name string, seq uint64, data any) {
	raw, err := json.Marshal(data)
	require.NoError(t, err)
	fc.send(t, wire.Event{Name: name, Data: raw, Seq: seq})
}

func newFakeBroker(t *testing.T, handle func(fc *fakeConn, req wire.Request)) *fakeBroker {
	t.Helper()
	path := filepath.Join(t.TempDir(), "b.sock")
	ln, err := net.Listen("unix", path)
	require.NoError(t, err)
	b := &fakeBroker{t: t, path: path, ln: ln, handle: handle}
	b.wg.Add(1)
	go b.accept()
	t.Cleanup(b.stop)
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
		fc := &fakeConn{conn: conn}
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
				fc.fail(b.t, req.ID, wire.CodeProtocol, wire.MsgHelloRequired)
				return
			}
			if b.hello != nil {
				if e := b.hello(req.Params); e != nil {
					fc.send(b.t, wire.Response{ID: req.ID, Error: e})
					return
				}
			}
			var h struct {
				RunID string `json:"runId"`
			}
			_ = json.Unmarshal(req.Params, &h)
			fc.reply(b.t, req.ID, wire.HelloAck{Protocol: 1, Session: "fake", Run: h.RunID, OK: true})
			authed = true
			continue
		}
		b.handle(fc, req)
	}
}
