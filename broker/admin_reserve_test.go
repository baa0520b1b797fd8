package broker

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/events"
)

// TestTheAdminHasPlacesBeyondMaxConns: connections of other principals that hold every one of the MaxConns places
// do not lock the operator out during the incident it connects for: the admin's hello succeeds in one of the
// AdminConns places kept for it alone, while another principal's hello in such a place is refused
// too-many-connections, saying why. Once the admin's places are taken too, a connection is refused at accept.
func TestTheAdminHasPlacesBeyondMaxConns(t *testing.T) {
	const maxConns = 4
	f := newFixture(t, fixtureOpts{opts: Options{MaxConns: maxConns, ReservedConns: -1}})
	s := f.seed()
	f.awaitConns(0)
	// Orchestrators hold every place, as those of many runs may: 64 connections each.
	for range maxConns {
		f.dialOrchestrator(s)
	}
	for _, tc := range []struct{ who, taskID, token string }{
		{"an orchestrator", events.OrchestratorKey, s.orch},
		{"a worker", taskP, s.p},
	} {
		e := f.dial().refusedHello(runR, tc.taskID, tc.token, wire.CodeTooManyConnections)
		require.Contains(t, e.Message, "kept for the admin", "%s in the admin's place", tc.who)
	}
	for range AdminConns {
		f.dial().helloAdmin()
	}
	extra := f.dial()
	end := extra.untilError()
	require.Equal(t, "", end.ID)
	require.Equal(t, wire.CodeTooManyConnections, end.Error.Code)
	extra.closed()
}

// TestConnectionsOfAnotherUserTakeNoAdminPlace: before its hello a connection is anyone's, so connections that never
// said hello took the AdminConns places too, and the workers of a crewd run as a dedicated daemon user
// (docs/security.md) — other users of the socket group, dialling from as many processes as MaxPendingPerPeer asks —
// could hold every place and lock the operator out. The admin token is crewd's uid's alone there: a connection of
// another uid is refused at accept once MaxConns are open, and crewd's own uid's still get the admin's places.
func TestConnectionsOfAnotherUserTakeNoAdminPlace(t *testing.T) {
	const maxConns = 2
	f := newFixture(t, fixtureOpts{opts: Options{MaxConns: maxConns, ReservedConns: -1, HelloTimeout: time.Minute}})
	f.awaitConns(0)
	foreign, pid := true, 1<<22
	f.srv.mu.Lock()
	f.srv.onPeer = func(p peer) peer { // under f.srv.mu
		if foreign {
			pid++ // each connection another process's
			p.UID, p.PID = p.UID+1, pid
		}
		return p
	}
	f.srv.mu.Unlock()
	for range maxConns {
		f.dial()
	}
	f.awaitConns(maxConns)
	for range AdminConns {
		extra := f.dial()
		end := extra.untilError()
		require.Equal(t, "", end.ID)
		require.Equal(t, wire.CodeTooManyConnections, end.Error.Code, "another user's connection in the admin's place")
		extra.closed()
	}
	f.srv.mu.Lock()
	foreign = false
	f.srv.mu.Unlock()
	for range AdminConns {
		f.dial().helloAdmin()
	}
}

// TestHellosWaitingForTheirPaceTakeNoReservedPlace: a hello waits for its credential's bucket holding the place it
// will take, counted as it is authenticated, so hellos of a credential deep in debt, however many, never wait in a
// place kept for others: past their share of MaxConns they are refused at once, not an hour later, and those the
// places are kept for get in.
func TestHellosWaitingForTheirPaceTakeNoReservedPlace(t *testing.T) {
	for _, tc := range []struct {
		name               string
		maxConns, reserved int
		refused            int    // the hellos refused at once, as many as the places kept for others
		why                string // in their refusal
		kept               func(f *fixture, s seeded)
	}{
		{"the admin's", 2, -1, AdminConns, "kept for the admin", func(f *fixture, _ seeded) { f.dial().helloAdmin() }},
		{"the orchestrators'", 4, 2, 2, "reserved", func(f *fixture, s seeded) { f.dialOrchestrator(s) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{opts: Options{MaxConns: tc.maxConns, ReservedConns: tc.reserved,
				HelloTimeout: time.Minute}})
			waits := watchPacerWaits(f)
			s := f.seed()
			f.awaitConns(0)
			// P owes half a minute of its rate (the replays it was served, say): within the hello timeout, so its
			// hellos wait.
			f.srv.pacer.charge(cred(workerKey(taskP)), 30*DefaultRatePerCredential, f.srv.pacer.now())
			hello := `{"id":"h","method":"hello","params":{"protocol":1,"runId":"` + runR + `","taskId":"` + taskP +
				`","token":"` + s.p + `"}}`
			for range tc.maxConns - max(tc.reserved, 0) {
				waits.arm()
				f.dial().sendLine(hello)
				waits.await("P's hello did not wait for its bucket")
			}
			for range tc.refused {
				e := f.dial().refusedHello(runR, taskP, s.p, wire.CodeTooManyConnections)
				require.True(t, strings.Contains(e.Message, tc.why), e.Message)
			}
			tc.kept(f, s)
		})
	}
}

// awaitConns waits until the server counts n open connections: it learns of a client's close only when its reader
// sees it.
func (f *fixture) awaitConns(n int) {
	f.t.Helper()
	require.Eventually(f.t, func() bool {
		f.srv.mu.Lock()
		defer f.srv.mu.Unlock()
		return len(f.srv.conns) == n
	}, guard, time.Millisecond, "open connections")
}
