package projections

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// settledCalls is run R's job J whose first lease saw settled calls, each completed, and whose second lease, open,
// has two calls in flight.
func settledCalls(settled int) *history {
	h := &history{}
	fixture(h, 0, true)
	h.add(runR, events.TypeJobCreated, &events.JobCreated{JobID: "J", TaskID: taskP, Tools: []string{"read"},
		Fingerprints: []string{"f-read"}, Callables: []string{""}, ManifestDigest: "digest"})
	h.add(runR, events.TypeLeaseOpened, &events.LeaseOpened{JobID: "J", Generation: 1, RootToolCallID: "root-1"})
	for i := range settled {
		id := fmt.Sprintf("c%05d", i)
		h.add(runR, events.TypeProxyRequested, &events.ProxyRequested{JobID: "J", RequestID: id, Generation: 1,
			Tool: "read"})
		h.add(runR, events.TypeProxyCompleted, &events.ProxyCompleted{JobID: "J", RequestID: id, Generation: 1,
			CurrentGeneration: 1})
	}
	h.add(runR, events.TypeLeaseCleared, &events.LeaseCleared{JobID: "J", Generation: 1, RootToolCallID: "root-1"})
	h.add(runR, events.TypeLeaseOpened, &events.LeaseOpened{JobID: "J", Generation: 2, RootToolCallID: "root-2"})
	for _, id := range []string{"live-b", "live-a"} {
		h.add(runR, events.TypeProxyRequested, &events.ProxyRequested{JobID: "J", RequestID: id, Generation: 2,
			Tool: "read"})
	}
	return h
}

// TestJobCallsInFlightWalkedAlone: clearing a job's lease (folded twice per event, by the writer and the
// publisher) aborts its calls in flight, and a job's disconnect cancels them (State.LiveRequests); both walk those
// calls alone, however many the job has seen (as many as the config's proxyMaxRequests, 65,536), where they walked
// every call the job had seen. The walks allocate nothing, so their time tells: the least of a few rounds, against
// a bound that a walk of 65,536 calls passes many times over.
func TestJobCallsInFlightWalkedAlone(t *testing.T) {
	cost := func(settled int) (clear, live time.Duration) {
		s := fold(settledCalls(settled).evs)
		require.Equal(t, []string{"live-b", "live-a"}, s.LiveRequests(runR, "J"))
		ev := events.Event{Stream: runR, Type: events.TypeLeaseCleared,
			SchemaVersion: events.SchemaVersion(events.TypeLeaseCleared),
			Payload:       &events.LeaseCleared{JobID: "J", Generation: 2, RootToolCallID: "root-2"}}
		cleared := s.Clone()
		Apply(cleared, ev)
		require.Empty(t, cleared.LiveRequests(runR, "J"))
		q, _ := cleared.ProxyRequestOf(runR, "J", "live-a")
		require.Equal(t, ProxyAborted, q.State)
		// NB: folding the clearing again finds nothing more to abort, and walks as the first fold did.
		return leastTime(func() { Apply(cleared, ev) }), leastTime(func() { s.LiveRequests(runR, "J") })
	}
	fewClear, fewLive := cost(0)
	manyClear, manyLive := cost(65_534)
	require.Less(t, manyClear, 10*fewClear+20*time.Microsecond,
		"%v to fold a lease's clearing with 65,536 calls seen, %v with 2", manyClear, fewClear)
	require.Less(t, manyLive, 10*fewLive+20*time.Microsecond,
		"%v to list the calls in flight with 65,536 calls seen, %v with 2", manyLive, fewLive)
}
