package commands

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// givenEvents folds events of run R into s, as the log would hand them over: one position each.
func givenEvents(t testing.TB, s *projections.State, payloads ...any) {
	t.Helper()
	for _, p := range payloads {
		typ, ok := events.TypeOf(p)
		require.True(t, ok, "%T", p)
		projections.Apply(s, events.Event{Position: s.Position + 1, Stream: "R", Type: typ,
			SchemaVersion: events.SchemaVersion(typ), Time: 1e18, Actor: events.Actor{Role: events.RoleAdmin},
			Payload: p})
	}
}

// settledDelegations is run R, running, whose task P has admitted and settled settled delegations, then admitted
// two that are still in flight, the second already asked to cancel.
func settledDelegations(t testing.TB, settled int) *projections.State {
	t.Helper()
	s := projections.New()
	givenEvents(t, s, &events.RunCreated{Team: "t", Goal: "g", Cwd: "/w"}, &events.RunRunning{},
		&events.TaskCreated{TaskID: "P", Role: "executor", Agent: "executor", Title: "p", Cwd: "/w"},
		&events.TaskStarted{TaskID: "P"})
	admit := func(sub string) *events.DelegateAdmitted {
		return &events.DelegateAdmitted{TaskID: "P", SubID: sub, ChildDepth: 2, Role: "explorer", Unmetered: true,
			TimeoutSec: 900, Deadline: 2e15, Cwd: "/w", Title: "delegate: " + sub}
	}
	for i := range settled {
		sub := fmt.Sprintf("gc-old-%06d", i)
		givenEvents(t, s, admit(sub), &events.DelegateCompleted{TaskID: "P", SubID: sub, OK: true})
	}
	givenEvents(t, s, admit("gc-live-b"), admit("gc-live-a"),
		&events.DelegateCancelRequested{TaskID: "P", SubID: "gc-live-a", Reason: "r"})
	return s
}

// TestRunEndWalksTheDelegationsInFlight: a run that ends asks its delegations in flight to cancel, and what the
// writer allocates to decide that does not grow with the delegations the run has settled. It copied every
// delegation the run ever admitted (State.Delegations) to find the few in flight, and a run may end again and again
// (a same-status transition, a reopened run).
func TestRunEndWalksTheDelegationsInFlight(t *testing.T) {
	cost := func(settled int) float64 {
		s := settledDelegations(t, settled)
		cmd := &RunTransition{RunID: "R", To: "completed"}
		env := Env{Config: s.Config(), Now: 1e18, Actor: events.Actor{Role: events.RoleOrchestrator}}
		d, err := Decide(s, cmd, env)
		require.NoError(t, err)
		require.Len(t, d.Events, 2, "run.completed, then the cancel of the one delegation not yet asked")
		require.Equal(t, events.TypeDelegateCancelRequested, d.Events[1].Type)
		require.Equal(t, "gc-live-b", d.Events[1].Payload.(*events.DelegateCancelRequested).SubID)
		return bytesPerRun(func() { Decide(s, cmd, env) })
	}
	// NB: 20,000 settled delegations copied are megabytes; the slack is for a stray allocation of another goroutine.
	const slack = 16 << 10
	few, many := cost(0), cost(20_000)
	require.LessOrEqual(t, many, few+slack, "%.0f bytes allocated with 20,000 settled delegations, %.0f with none",
		many, few)
}
