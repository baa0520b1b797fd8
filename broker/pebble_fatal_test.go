package broker

import (
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
)

// A Pebble fatal error met on one of the server's goroutines (a connection's request that saves the import
// checkpoints' view or a cold run's, the mailbox feed's read of the log) is never recovered: the store it leaves
// answers nothing, so crewd must exit for its supervisor to restart it, where the recover closed the connection (or
// stopped the pushes) and crewd went on. Any other panic is still recovered, closing its connection and no other: a
// client's request cannot stop crewd, nor end another client's connection.
func TestAPebbleFatalOnTheServersGoroutinesIsNeverRecovered(t *testing.T) {
	fatal := &eventlog.FatalError{Msg: "MANIFEST write failed", Err: syscall.ENOSPC}
	f := newFixture(t, fixtureOpts{})
	s := f.seed()
	o := f.dial()
	o.hello(runR, "orchestrator", s.orch)
	c := anyConn(t, f.srv)
	w := f.dial() // after anyConn: c is o's, the only connection then
	w.hello(runR, taskP, s.p)

	t.Run("a connection's goroutine", func(t *testing.T) {
		require.PanicsWithValue(t, fatal, func() {
			defer c.recover()
			panic(fatal)
		})
		require.NotPanics(t, func() {
			defer c.recover()
			panic("a bad request")
		})
		o.closed() // the ordinary panic closed its connection
		require.Equal(t, true, w.ok("ping", nil)["pong"], "and that one only")
		f.panics.Store(0)
	})

	t.Run("the mailbox feed", func(t *testing.T) {
		for _, c := range []struct {
			name    string
			value   any
			escapes bool
		}{{"pebble fatal", fatal, true}, {"ordinary", "a bad record", false}} {
			t.Run(c.name, func(t *testing.T) {
				srv, err := New(f.eng, f.log, f.srv.opts)
				require.NoError(t, err)
				srv.feedStarting = func() { panic(c.value) }
				srv.wg.Add(1)
				feed := func() { srv.feed(f.eng.Head()+1, f.eng.Tap(feedTapBound)) }
				if c.escapes {
					require.PanicsWithValue(t, c.value, feed)
				} else {
					require.NotPanics(t, feed)
				}
				f.panics.Store(0)
			})
		}
	})
}

// anyConn is one of srv's connections.
func anyConn(t *testing.T, srv *Server) *conn {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for c := range srv.conns {
		return c
	}
	t.Fatal("no connection")
	return nil
}
