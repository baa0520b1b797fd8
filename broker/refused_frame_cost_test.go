package broker

import (
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
)

// TestFramesRefusedAfterHelloCostTheirBytes: an authenticated connection's line that is malformed, over the cap or
// cut off by the end of its stream closes the connection without a frame, and costs its credential what a request
// of its bytes does, as such a line before a hello costs its process. Until it did, it cost nothing: a token that
// dialled in a loop had a frame of up to MaxFrame read and parsed for each hello's units alone, more than twice the
// bytes per unit its requests get.
func TestFramesRefusedAfterHelloCostTheirBytes(t *testing.T) {
	pad := strings.Repeat("x", 100<<10)
	for name, tc := range map[string]struct {
		sent  string
		cut   bool // the stream ends after it
		bytes int  // what it takes of the stream, as the server reads it
	}{
		"malformed": {sent: `{"id":"p","method":"ping","params":{"x":"` + pad + `"}` + "\n"},
		"over the cap": {
			sent:  `{"id":"p","method":"ping","params":{"x":"` + pad + pad + pad + `"}}` + "\n",
			bytes: wire.DefaultMaxFrame,
		},
		"truncated": {sent: `{"id":"p","method":"ping","params":{"x":"` + pad + `"}}`, cut: true},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{opts: Options{RatePerCredential: 1, BurstPerCredential: 1 << 20}})
			clock := installPacerClock(f)
			s := f.seed()
			clock.freeze()
			w := f.dial()
			w.hello(runR, taskP, s.p)
			before := clock.level(workerKey(taskP))
			w.nc.Write([]byte(tc.sent)) // NB: the server may close before it has read it all
			if tc.cut {
				require.NoError(t, w.nc.(*net.UnixConn).CloseWrite())
			}
			w.closed()
			bytes := tc.bytes
			if bytes == 0 {
				bytes = len(tc.sent)
			}
			require.Equal(t, float64(requestCost(bytes)), before-clock.level(workerKey(taskP)))
		})
	}
}
