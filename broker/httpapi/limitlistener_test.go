package httpapi

import (
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLimitListenerHoldsAPlacePerOpenConnection: each accepted connection holds a place until its first Close;
// a second Close gives nothing back twice.
func TestLimitListenerHoldsAPlacePerOpenConnection(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l := newLimitListener(inner, 2)
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
	require.Len(t, l.sem, 2, "both places held: a third Accept would wait")
	first := <-accepted
	require.NoError(t, first.Close())
	first.Close()
	require.Len(t, l.sem, 1, "one place back, once")
	require.NoError(t, l.Close())
	_, err = l.Accept()
	require.ErrorIs(t, err, net.ErrClosed)
}

func TestOptionsMaxConnsAboveMaxStreams(t *testing.T) {
	o := Options{MaxConns: 10, MaxStreams: 10}
	require.ErrorContains(t, o.validate(), "MaxConns 10 must exceed MaxStreams 10")
}
