package broker

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
)

// TestHelloPacedAcrossARevocationIsRefused: a hello whose credential checked out, but which waits for its
// credential's budget (pacing) while the credential is revoked, is refused when the wait ends. Before it was
// refused, the connection was bound with the revoked credential: no request ever re-checked it, the feed had
// already re-checked the run's connections before it was bound, and it was pushed the task's mail for as long as
// it stayed idle.
func TestHelloPacedAcrossARevocationIsRefused(t *testing.T) {
	f := newFixture(t, fixtureOpts{opts: Options{RatePerCredential: 1000, BurstPerCredential: helloCost}})
	clock := installPacerClock(f)
	waits := watchPacerWaits(f)
	s := f.seed()
	o := f.dialOrchestrator(s)
	clock.freeze()
	first := f.dial()
	first.hello(runR, taskP, s.p) // the whole burst: P's next hello waits for its bucket
	waits.arm()
	late := f.dial()
	late.sendLine(`{"id":"h","method":"hello","params":{"protocol":1,"runId":"R1","taskId":"P","token":"` + s.p + `"}}`)
	waits.await("the second hello did not wait for its credential's budget")
	o.ok("credential.revoke", map[string]any{"taskId": taskP})
	end := first.untilError() // the feed has handled the revocation: the bound connection is ended
	require.Equal(t, wire.CodeRevoked, end.Error.Code)
	o.ok("msg.send", map[string]any{"to": taskP, "body": "after the revocation"})

	clock.advance(time.Second) // the bucket refills: the held hello goes on
	frame, err := late.read()
	require.NoError(t, err)
	var r wire.Response
	require.NoError(t, json.Unmarshal(frame, &r))
	require.Equal(t, "h", r.ID)
	require.NotNil(t, r.Error, "a revoked credential was bound: %s", frame)
	require.Equal(t, wire.CodeRevoked, r.Error.Code)
	late.closed()
}

// TestRefusedHellosArePacedPerProcess: a hello its token does not authenticate costs the connecting process (by its
// pid) helloCost units, as an accepted one costs its credential: a process dialling with a wrong token in a loop
// is answered at the pacing rate, not as fast as it can dial. Until it was, nothing paced it (no credential to
// charge) and one process had thousands of refusals a second computed for it.
func TestRefusedHellosArePacedPerProcess(t *testing.T) {
	f := newFixture(t, fixtureOpts{opts: Options{RatePerCredential: 1000, BurstPerCredential: 2 * helloCost}})
	clock := installPacerClock(f)
	waits := watchPacerWaits(f)
	s := f.seed()
	clock.freeze()
	for range 2 { // the burst
		f.dial().refusedHello(runR, taskP, "wrong", wire.CodeStaleToken)
	}
	waits.arm()
	late := f.dial()
	late.sendLine(`{"id":"h","method":"hello","params":{"protocol":1,"runId":"R1","taskId":"P","token":"wrong"}}`)
	waits.await("the third refused hello was not paced")
	require.Equal(t, 0.0, clock.level(peerKey(os.Getpid())), "its answer waits for the process's bucket")
	clock.advance(time.Second) // the bucket refills: the hello is answered
	frame, err := late.read()
	require.NoError(t, err)
	var r wire.Response
	require.NoError(t, json.Unmarshal(frame, &r))
	require.Equal(t, "h", r.ID)
	require.Equal(t, wire.CodeStaleToken, r.Error.Code)
	late.closed()
	f.dialOrchestrator(s).ok("ping", nil) // an accepted hello costs its credential, not its process
}
