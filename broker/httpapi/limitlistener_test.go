package httpapi

import (
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLimitListenerHoldsAPlacePerOpenConnection: each accepted connection holds a place until its first Close;
// a second Close gives nothing back twice.
func TestLimitListenerHoldsAPlacePerOpenConnection(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l := newLimitListener(inner, 2, time.Second)
	defer l.Close()
	accepted := make(chan net.Conn, 2)
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", inner.Addr().String())
		require.NoError(t, err)
		defer c.Close()
		sc, err := l.Accept()
		require.NoError(t, err)
		accepted <- sc
	}
	require.Equal(t, 2, l.held, "both places held")
	first := <-accepted
	require.NoError(t, first.Close())
	first.Close()
	require.Equal(t, 1, l.held, "one place back, once")
	require.NoError(t, l.Close())
	_, err = l.Accept()
	require.ErrorIs(t, err, net.ErrClosed)
}

// TestLimitListenerChoosesWhomToClose: the connection idle the longest, else the oldest past the grace of the new
// ones and the active ones whose request keeps no place; never an active one whose request keeps its place, nor a
// hijacked one; one within the grace is waited for, to its last nanosecond, and is past it at the grace exactly.
func TestLimitListenerChoosesWhomToClose(t *testing.T) {
	const grace = 10 * time.Second
	const n, a, i, c = http.StateNew, http.StateActive, http.StateIdle, http.StateClosed
	const k = http.ConnState(-1) // not a state: the request in progress keeps its place (keep)
	const g = http.ConnState(-2) // not a state: ... and no longer does (letGo)
	for _, tc := range []struct {
		name   string
		conns  [][]http.ConnState // each connection's states, in turns; each change a second after the last
		after  time.Duration      // from the last change to the choice
		victim int                // index; -1: none
		retry  time.Duration      // when none: the wait until a new one is past the grace (0: no such wait)
	}{
		{"idle longest first", [][]http.ConnState{{n, a, k}, {n, a, i}, {n, a, i}}, 0, 1, 0},
		{"idle again goes to the back", [][]http.ConnState{{n, a, i, a, i}, {n, a, i}}, 0, 1, 0},
		{"idle before new", [][]http.ConnState{{n}, {n, a, i}}, 10 * grace, 1, 0},
		{"oldest new past the grace", [][]http.ConnState{{n}, {n}}, grace, 0, 0},
		{"new within the grace: wait", [][]http.ConnState{{n}, {n}}, grace / 4, -1, grace - grace/4 - time.Second},
		{"new a nanosecond within the grace: wait", [][]http.ConnState{{n}}, grace - time.Nanosecond, -1, time.Nanosecond},
		{"new at the grace", [][]http.ConnState{{n}}, grace, 0, 0},
		{"kept and hijacked never", [][]http.ConnState{{n, a, k}, {n, http.StateHijacked}, {n, a, i, a, k}},
			10 * grace, -1, 0},
		{"active not kept past the grace", [][]http.ConnState{{n, a, k}, {n, a, i, a}}, grace, 1, 0},
		{"active not kept within the grace: wait", [][]http.ConnState{{n, a, i, a}}, grace / 4, -1, grace - grace/4},
		{"the older of new and active", [][]http.ConnState{{n}, {n, a}}, grace, 0, 0},
		{"active by when the request came", [][]http.ConnState{{n, a}, {n, a, i, a}}, grace, 0, 0},
		{"kept again", [][]http.ConnState{{n, a, i, a, k}, {n, a, k}}, 10 * grace, -1, 0},
		{"let go: from then", [][]http.ConnState{{n, a, k, g}, {n, a}}, grace - time.Second, 1, 0},
		{"let go past the grace", [][]http.ConnState{{n, a, k, g}}, grace, 0, 0},
		{"idle after let go", [][]http.ConnState{{n, a, k, g, i}, {n, a, i}}, 0, 1, 0},
		{"closed leaves the lists", [][]http.ConnState{{n, a, i, c}, {n, c}}, 10 * grace, -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := time.Unix(1_000_000, 0)
			l := newLimitListener(nil, len(tc.conns), grace)
			l.now = func() time.Time { return clock }
			l.held = len(tc.conns)
			cs := make([]*limitConn, len(tc.conns))
			for i := range cs {
				cs[i] = &limitConn{l: l}
			}
			// Each connection's first state, then each one's second, ...: as interleaved as a server's.
			for step := 0; ; step++ {
				moved := false
				for i, states := range tc.conns {
					if step < len(states) {
						clock = clock.Add(time.Second)
						switch states[step] {
						case k:
							l.keep(cs[i])
						case g:
							l.letGo(cs[i])
						default:
							l.connState(cs[i], states[step])
						}
						moved = true
					}
				}
				if !moved {
					break
				}
			}
			clock = clock.Add(tc.after)
			victim, retry := l.victim(clock)
			if tc.victim < 0 {
				require.Nil(t, victim)
			} else {
				require.Same(t, cs[tc.victim], victim)
			}
			require.Equal(t, tc.retry, retry)
		})
	}
}

// TestLimitListenerTakesTheFirstPlaceToGoIdle: with every place active with a request that keeps it or hijacked,
// Accept holds the new connection until one goes idle, closes that one and hands the new one its place; the others
// stay open. Close ends a waiting Accept and closes the connection it held.
func TestLimitListenerTakesTheFirstPlaceToGoIdle(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l := newLimitListener(inner, 2, time.Nanosecond)
	defer l.Close()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", inner.Addr().String())
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		require.NoError(t, c.SetReadDeadline(time.Now().Add(time.Minute))) // a guard against a hang
		return c
	}
	var peers, served []net.Conn
	for _, st := range []http.ConnState{http.StateHijacked, http.StateActive} {
		peers = append(peers, dial())
		sc, err := l.Accept()
		require.NoError(t, err)
		served = append(served, sc)
		l.connState(sc, http.StateNew)
		l.connState(sc, st)
		l.keep(sc.(*limitConn))
	}
	type accepted struct {
		c   net.Conn
		err error
	}
	next := make(chan accepted, 1)
	accept := func() {
		c, err := l.Accept()
		next <- accepted{c, err}
	}
	third := dial()
	go accept()
	l.connState(served[1], http.StateIdle)
	a := recv(t, next, "Accept of the third connection once a place went idle")
	require.NoError(t, a.err)
	defer a.c.Close()
	_, err = peers[1].Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF, "the idle one was closed")
	_, err = served[0].Write([]byte("x"))
	require.NoError(t, err, "the hijacked one is open")
	_, err = io.ReadFull(peers[0], make([]byte, 1))
	require.NoError(t, err)
	_, err = a.c.Write([]byte("y"))
	require.NoError(t, err)
	_, err = io.ReadFull(third, make([]byte, 1))
	require.NoError(t, err, "the new one has the place")
	require.Equal(t, 2, l.held)
	require.Equal(t, uint64(1), l.evictedIdle.Load())

	l.connState(a.c, http.StateNew)
	l.connState(a.c, http.StateActive)
	l.keep(a.c.(*limitConn))
	fourth := dial()
	go accept()
	require.NoError(t, l.Close())
	a = recv(t, next, "return from the waiting Accept once the listener closed")
	require.ErrorIs(t, a.err, net.ErrClosed)
	_, err = fourth.Read(make([]byte, 1))
	require.Error(t, err, "the connection held while waiting is closed")
}
