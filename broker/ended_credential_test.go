package broker

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/events"
)

// A worker's command checked by the broker just before its credential is
// revoked is decided after the revocation unless the writer checks the
// credential again: workers keep commands in flight on many connections
// while the orchestrator revokes their credential, and nothing of theirs
// may be recorded after credential.revoked; each connection is answered
// revoked and closed.
func TestNothingIsRecordedForACredentialAfterItsRevocation(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	s := f.seed()
	const conns = 32
	var sent atomic.Int64
	var wg sync.WaitGroup
	codes := make(chan wire.Code, conns)
	for range conns {
		w := f.dial()
		w.hello(runR, taskP, s.p)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				r, err := w.try("msg.send", map[string]any{"to": "parent", "body": "x"})
				if err != nil {
					codes <- ""
					return
				}
				if r.Error != nil {
					codes <- r.Error.Code
					return
				}
				sent.Add(1)
			}
		}()
	}
	require.Eventually(t, func() bool { return sent.Load() >= 4*conns }, guard, time.Millisecond)
	o := f.dial()
	o.hello(runR, events.OrchestratorKey, s.orch)
	o.ok("credential.revoke", map[string]any{"taskId": taskP})
	wg.Wait()
	close(codes)
	for code := range codes {
		// NB: "" is a connection closed by the revocation's frame before an answer was read.
		require.Contains(t, []wire.Code{wire.CodeRevoked, ""}, code)
	}

	revokedAt, after := uint64(0), 0
	it := f.log.Read(1)
	defer it.Close()
	for it.Next() {
		ev := it.Event()
		switch {
		case ev.Type == events.TypeCredentialRevoked:
			revokedAt = ev.Position
		case revokedAt > 0 && ev.ActorRole == events.RoleWorker && ev.ActorTask == taskP:
			after++
		}
	}
	require.NoError(t, it.Err())
	require.NotZero(t, revokedAt)
	require.Zero(t, after, "events of the worker recorded after its credential was revoked")
}
