package broker

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
)

// TestRequestsBeforeHelloArePacedPerProcess: a connection whose first request is not a hello is refused "hello
// required" at its process's pace, and costs the process (by its pid) what a refused hello does. Until it did, it
// cost nothing and waited for nothing: a process whose refused hellos had put it in debt dialled on at full speed
// with any other first request, each a connection set up, a frame of up to MaxFrame read and decoded, and torn down.
func TestRequestsBeforeHelloArePacedPerProcess(t *testing.T) {
	for name, first := range map[string]string{
		"ping":          `{"id":"p","method":"ping","params":null}`,
		"a large frame": `{"id":"p","method":"run.create","params":{"pad":"` + strings.Repeat("x", 64<<10) + `"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{opts: Options{RatePerCredential: 1000, BurstPerCredential: 2 * helloCost}})
			clock := installPacerClock(f)
			waits := watchPacerWaits(f)
			clock.freeze()
			refused := func(c *client) {
				t.Helper()
				require.Equal(t, wire.NewError(wire.CodeProtocol, wire.MsgHelloRequired), c.closingError("p"))
			}
			for range 2 { // the burst
				c := f.dial()
				c.sendLine(first)
				refused(c)
			}
			require.Equal(t, 0.0, clock.level(peerKey(os.Getpid())), "each refusal cost its process a hello's units")
			waits.arm()
			late := f.dial()
			late.sendLine(first)
			waits.await("the third request before a hello was not paced")
			clock.advance(time.Second) // the bucket refills: the request is answered
			refused(late)
		})
	}
}

// TestFramesRefusedBeforeHelloArePacedPerProcess: a connection whose first frame is malformed or over the cap is
// closed without a frame at its process's pace, and costs the process what a refused hello does. Until it did, a
// process whose refused hellos had put it in debt dialled on at full speed with such frames, each a connection set
// up, up to MaxFrame read and parsed, and torn down.
func TestFramesRefusedBeforeHelloArePacedPerProcess(t *testing.T) {
	for name, first := range map[string]string{
		"malformed":    `{"id":"p","method":}`,
		"over the cap": `{"id":"p","method":"hello","params":"` + strings.Repeat("x", wire.MaxFrameFloor) + `"}`,
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{opts: Options{MaxFrame: wire.MaxFrameFloor, RatePerCredential: 1000,
				BurstPerCredential: 2 * helloCost}})
			clock := installPacerClock(f)
			waits := watchPacerWaits(f)
			clock.freeze()
			for range 2 { // the burst
				c := f.dial()
				c.nc.Write([]byte(first + "\n")) // NB: the server may close before it has read it all
				c.closed()
			}
			require.Equal(t, 0.0, clock.level(peerKey(os.Getpid())), "each close cost its process a hello's units")
			waits.arm()
			late := f.dial()
			late.nc.Write([]byte(first + "\n"))
			waits.await("the third frame refused before a hello was not paced")
			clock.advance(time.Second) // the bucket refills: the connection is closed
			late.closed()
		})
	}
}

// closingError reads the connection's next frame, which must be an error answering request id, and then its close.
func (c *client) closingError(id string) *wire.Error {
	c.t.Helper()
	frame, err := c.read()
	require.NoError(c.t, err)
	var r wire.Response
	require.NoError(c.t, json.Unmarshal(frame, &r))
	require.Equal(c.t, id, r.ID, "%s", frame)
	require.NotNil(c.t, r.Error, "%s", frame)
	c.closed()
	return r.Error
}
