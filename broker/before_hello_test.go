package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
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
			f := newFixture(t, fixtureOpts{opts: Options{RatePerCredential: 1000,
				BurstPerCredential: 2 * helloUnits(len(first)+1)}})
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

// TestFramesRefusedBeforeHelloArePacedPerProcess: a connection whose first frame is malformed, over the cap or cut
// off by the end of its stream is closed without a frame at its process's pace, and costs the process what a refused
// hello does. Until it did, a process whose refused hellos had put it in debt dialled on at full speed with such
// frames, each a connection set up, up to MaxFrame read and parsed, and torn down; and one whose line the stream
// ended in still did.
func TestFramesRefusedBeforeHelloArePacedPerProcess(t *testing.T) {
	for name, sent := range map[string]string{
		"malformed":    `{"id":"p","method":}` + "\n",
		"over the cap": `{"id":"p","method":"hello","params":"` + strings.Repeat("x", wire.MaxFrameFloor) + `"}` + "\n",
		"truncated":    `{"id":"p","method":"hello","params":{"protocol":1`, // and the client's end of the stream
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{opts: Options{MaxFrame: wire.MaxFrameFloor, RatePerCredential: 1000,
				BurstPerCredential: 2 * helloCost}})
			clock := installPacerClock(f)
			waits := watchPacerWaits(f)
			clock.freeze()
			send := func(c *client) {
				c.nc.Write([]byte(sent)) // NB: the server may close before it has read it all
				if !strings.HasSuffix(sent, "\n") {
					require.NoError(t, c.nc.(*net.UnixConn).CloseWrite())
				}
			}
			for range 2 { // the burst
				c := f.dial()
				send(c)
				c.closed()
			}
			require.Equal(t, 0.0, clock.level(peerKey(os.Getpid())), "each close cost its process a hello's units")
			waits.arm()
			late := f.dial()
			send(late)
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

// TestAHelloCostsItsBytes: a connection's first frame costs what a hello does and one more unit per frameUnit bytes
// it took, as every later request pays for its bytes: to its credential when it is a hello that authenticates, else
// to its process. Until it did, a hello of any size cost helloCost alone, and a token, or a process, that dialled in
// a loop with hellos of MaxFrame bytes had five times as many bytes read and parsed for its units as its requests.
func TestAHelloCostsItsBytes(t *testing.T) {
	pad := `,"pad":"` + strings.Repeat("x", 100<<10) + `"`
	hello := `{"id":"h","method":"hello","params":{"protocol":1,"runId":"R1","taskId":"P","token":"%s"` + pad + `}}`
	ping := `{"id":"h","method":"ping","params":{"x":"%s"` + pad + `}}`
	for name, tc := range map[string]struct {
		first, token string
		payer        string
		cut          bool // sent without its line end, and the stream ended
	}{
		"an accepted hello":        {hello, "", workerKey(taskP), false},
		"a refused hello":          {hello, "wrong", peerKey(os.Getpid()), false},
		"a request before a hello": {ping, "", peerKey(os.Getpid()), false},
		"a malformed frame":        {ping[:len(ping)-1], "", peerKey(os.Getpid()), false},
		"a truncated frame":        {ping, "", peerKey(os.Getpid()), true},
	} {
		t.Run(name, func(t *testing.T) {
			const full = 1 << 20
			f := newFixture(t, fixtureOpts{opts: Options{RatePerCredential: 1, BurstPerCredential: full}})
			clock := installPacerClock(f)
			s := f.seed()
			clock.freeze()
			token := tc.token
			if token == "" {
				token = s.p
			}
			sent := fmt.Sprintf(tc.first, token) + "\n"
			if tc.cut {
				sent = sent[:len(sent)-1]
			}
			c := f.dial()
			_, err := c.nc.Write([]byte(sent))
			require.NoError(t, err)
			if tc.cut {
				require.NoError(t, c.nc.(*net.UnixConn).CloseWrite())
			}
			// NB: the first frame is charged before it is answered, or the connection closed: either is the signal.
			_, err = c.read()
			var ne net.Error
			require.False(t, errors.As(err, &ne) && ne.Timeout(), "the first frame was neither answered nor closed")
			require.Equal(t, float64(full-helloCost-len(sent)/frameUnit), clock.level(tc.payer))
		})
	}
}
