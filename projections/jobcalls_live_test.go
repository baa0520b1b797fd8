package projections

import (
	"fmt"
	"testing"

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
// every call the job had seen. The settled calls are taken out of the job's list before either walk, so a walk that
// reads one dereferences nil and fails the test.
func TestJobCallsInFlightWalkedAlone(t *testing.T) {
	s := fold(settledCalls(1000).evs)
	j := s.runs[runR].jobs["J"]
	require.Len(t, j.live, 2, "the job keeps its two calls in flight apart")
	for i, q := range j.Requests {
		if !q.Live() {
			j.Requests[i] = nil
		}
	}
	require.Equal(t, []string{"live-b", "live-a"}, s.LiveRequests(runR, "J"))
	Apply(s, events.Event{Stream: runR, Type: events.TypeLeaseCleared,
		SchemaVersion: events.SchemaVersion(events.TypeLeaseCleared),
		Payload:       &events.LeaseCleared{JobID: "J", Generation: 2, RootToolCallID: "root-2"}})
	require.Empty(t, s.LiveRequests(runR, "J"))
	require.Empty(t, j.live)
	for _, id := range []string{"live-b", "live-a"} {
		q, ok := s.ProxyRequestOf(runR, "J", id)
		require.True(t, ok)
		require.Equal(t, ProxyAborted, q.State, id)
	}
}

// A job's count of calls in flight (InFlight, which proxy.request holds to proxyMaxInFlight) is its calls in flight
// whatever generation a log records them under: clearing a lease aborts the calls of its generation and counts the
// others still in flight, where it counted none, so that a call of another generation ending after it took the
// count below zero, and every later call went uncounted by one.
func TestALeaseClearedCountsTheCallsOfOtherGenerationsStillInFlight(t *testing.T) {
	h := settledCalls(0) // lease 2 open, calls live-b and live-a in flight under it
	h.add(runR, events.TypeProxyRequested, &events.ProxyRequested{JobID: "J", RequestID: "other", Generation: 7,
		Tool: "read"})
	h.add(runR, events.TypeLeaseCleared, &events.LeaseCleared{JobID: "J", Generation: 2, RootToolCallID: "root-2"})
	s := fold(h.evs)
	requireInFlight := func(want int, what string) {
		t.Helper()
		head, ok := s.JobHeader(runR, "J")
		require.True(t, ok)
		require.Equal(t, want, head.InFlight, what)
		require.Len(t, s.LiveRequests(runR, "J"), want, what)
	}
	requireInFlight(1, "the call of generation 7 is still in flight")
	Apply(s, h.add(runR, events.TypeProxyCompleted, &events.ProxyCompleted{JobID: "J", RequestID: "other",
		Generation: 7, CurrentGeneration: 2}))
	requireInFlight(0, "it completed")
	Apply(s, h.add(runR, events.TypeLeaseOpened, &events.LeaseOpened{JobID: "J", Generation: 3,
		RootToolCallID: "root-3"}))
	Apply(s, h.add(runR, events.TypeProxyRequested, &events.ProxyRequested{JobID: "J", RequestID: "next",
		Generation: 3, Tool: "read"}))
	requireInFlight(1, "the next call is counted")
}
