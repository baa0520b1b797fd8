package commands

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// TestLeaseClearCopiesNoRevokedRoot: clearing a lease reads how many roots the run has revoked, not a copy of them,
// so what the writer allocates to decide a lease.clear (and every decision that ends a worker holding a lease) does
// not grow with the leases the run has cleared before (up to the config's revokedRootLimit, 65,536).
func TestLeaseClearCopiesNoRevokedRoot(t *testing.T) {
	cost := func(revoked int) float64 {
		w := workerEndWorld(t, true)
		s := w.s
		j, _ := s.JobHeader("R", "J")
		// NB: the earlier leases of job J, each cleared with its root revoked; the last is the open one's.
		for i := range revoked {
			gen := j.Generation + int64(i) + 1
			root := fmt.Sprintf("old-root-%05d", i)
			givenEvents(t, s, &events.LeaseCleared{JobID: "J", Generation: gen - 1, RootToolCallID: root},
				&events.LeaseOpened{JobID: "J", Generation: gen, RootToolCallID: "call-1", Mode: "continue"})
		}
		rr := s.RevokedRootsOf("R")
		require.Len(t, rr.Roots, revoked)
		cmd := &LeaseClear{RunID: "R", JobID: "J", Reason: "stop"}
		env := w.env(events.Actor{Role: events.RoleOrchestrator})
		d, err := Decide(s, cmd, env)
		require.NoError(t, err)
		require.Len(t, d.Events, 1)
		require.False(t, d.Events[0].Payload.(*events.LeaseCleared).Saturated)
		return bytesPerRun(func() { Decide(s, cmd, env) })
	}
	const slack = 4 << 10
	few, many := cost(0), cost(4000)
	require.LessOrEqual(t, many, few+slack, "%.0f bytes allocated with 4,000 roots revoked, %.0f with none", many,
		few)
}

// TestLeaseClearOfARevokedRootDoesNotSaturate: a lease opened again on a root the run has revoked already (a manager
// continuing its job under the same dispatch call) and cleared once more revokes nothing new, so it must not
// saturate the set, even when the set is full: saturation blocks every nested call of the run (T18) until the
// manager's session resets the roots, and was reached one revocation early.
func TestLeaseClearOfARevokedRootDoesNotSaturate(t *testing.T) {
	w := workerEndWorld(t, true, "revokedRootLimit=1")
	mustDo(t, w, events.RoleOrchestrator, "", "job.transition", `{"jobId":"J","to":"paused"}`)
	require.Equal(t, projections.RevokedRoots{Roots: []string{"call-1"}}, w.s.RevokedRootsOf("R"))
	mustDo(t, w, events.RoleOrchestrator, "", "lease.open",
		`{"jobId":"J","mode":"continue","rootToolCallId":"call-1","tools":`+string(jobGrant)+`}`)

	out := mustDo(t, w, events.RoleOrchestrator, "", "job.transition", `{"jobId":"J","to":"paused"}`)
	require.False(t, out.events[0].Payload.(*events.LeaseCleared).Saturated, "the root was revoked already")
	require.Equal(t, projections.RevokedRoots{Roots: []string{"call-1"}}, w.s.RevokedRootsOf("R"))
	require.Equal(t, projections.AuthRevokedRoot, authorized(t, w.s, "R", "call-1/c", "read").Reason)
	require.Equal(t, projections.AuthUnrelated, authorized(t, w.s, "R", "call-2/c", "read").Reason)

	// A new root at the limit saturates, as before.
	mustDo(t, w, events.RoleOrchestrator, "", "lease.open",
		`{"jobId":"J","mode":"continue","rootToolCallId":"call-2","tools":`+string(jobGrant)+`}`)
	out = mustDo(t, w, events.RoleOrchestrator, "", "job.transition", `{"jobId":"J","to":"paused"}`)
	require.True(t, out.events[0].Payload.(*events.LeaseCleared).Saturated)
	require.Equal(t, projections.AuthSaturated, authorized(t, w.s, "R", "call-3/c", "read").Reason)
}
