package broker

import (
	"fmt"
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
	awaitGroup(t, &wg, "end of the senders once the credential was revoked")
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

// Two credential.issue of one task decided back to back: the first was
// issued, then replaced, and its answer is its token (a hello with it is
// then refused revoked, as after any re-issue), not a refusal that tells
// its caller its commandId was used for another request.
func TestConcurrentIssuesOfOneTaskEachAnswerTheirToken(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	s := f.seed()
	const conns, issues = 8, 40
	var wg sync.WaitGroup
	errs := make(chan string, conns*issues)
	for i := range conns {
		o := f.dial()
		o.hello(runR, events.OrchestratorKey, s.orch)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range issues {
				r, err := o.try("credential.issue", map[string]any{"taskId": taskP, "commandId": fmt.Sprintf("issue-%d-%d", i, j)})
				switch {
				case err != nil:
					errs <- err.Error()
				case r.Error != nil:
					errs <- string(r.Error.Code) + ": " + r.Error.Message
				}
			}
		}()
	}
	awaitGroup(t, &wg, "end of the orchestrators' issues")
	close(errs)
	refused, first := 0, ""
	for e := range errs {
		if refused++; first == "" {
			first = e
		}
	}
	require.Zero(t, refused, "issues refused, the first: %s", first)
}
