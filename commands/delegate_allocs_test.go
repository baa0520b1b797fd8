package commands

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// The engine decides a delegate.request and a delegate.settle for every delegation; each allocation of either is
// paid by the collector too. Deciding allocates the records it writes, the subId and the message's id, and nothing to
// read the state: the parent task is read without its view, a copy of its dependencies and allocation.
func TestDelegateDecisionAllocations(t *testing.T) {
	f := openEngine(t, vfs.NewMem(), newTestClock(), nil)
	f.seedRun("R", MaxBudgetTotal)
	r, err := f.eng.Submit(t.Context(), Request{Principal: events.WorkerPrincipal("R", "02_exec"), CommandID: "c1",
		Actor: worker("02_exec"), Command: &DelegateRequest{RunID: "R", TaskID: "02_exec", Prompt: "find X",
			BudgetTokens: ptr(int64(1000))}})
	require.NoError(t, err)
	require.Nil(t, r.Rejected)
	var s *projections.State
	f.eng.Read(func(st *projections.State) { s = st.Clone() })
	subID := r.Value.(*DelegateResult).GrandchildTaskRef

	id := func() string { return "0123456789abcdef0123456789abcdef" }
	for _, tc := range []struct {
		name  string
		cmd   Command
		actor events.Actor
		most  float64
	}{
		{"delegate.request", &DelegateRequest{RunID: "R", TaskID: "02_exec", Prompt: "find X",
			BudgetTokens: ptr(int64(1000))}, worker("02_exec"), 2},
		{"delegate.settle", &DelegateSettle{RunID: "R", SubID: subID, Outcome: OutcomeOK, Text: "done"},
			orchestrator, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := Env{Config: s.Config(), Now: 1e15, NewID: id, Actor: tc.actor, CommandID: "c2"}
			d, err := decideIn(s, tc.cmd, &env)
			require.NoError(t, err)
			require.NotEmpty(t, d.Events)
			require.LessOrEqual(t, testing.AllocsPerRun(100, func() { _, _ = decideIn(s, tc.cmd, &env) }), tc.most)
		})
	}
}
