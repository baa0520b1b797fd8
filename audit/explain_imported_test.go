package audit

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// TestExplainImportedDecisions: an imported delegation decision was taken by the system that recorded it, under its
// config, so replay --explain names it as imported and does not call it drift because crewlog's policy decides the
// same request otherwise (here: nesting off in crewlog, slots free where the other system found none).
func TestExplainImportedDecisions(t *testing.T) {
	const run = "team_20261001090000_0000000000000001"
	cfg := projections.DefaultConfig()
	cfg.NestingEnabled = false
	imp := func(evs ...commands.ImportedEvent) decided {
		return decided{audittest.Admin, &commands.Import{Source: events.ForeignSourcePicrew, RunID: run, Events: evs}}
	}
	at := audittest.Epoch.UnixMilli()
	w, l, dir := decidedLog(t, []decided{
		{audittest.Admin, &commands.Configure{Config: cfg}},
		imp(commands.ImportedEvent{Type: events.TypeRunCreated, TimeMs: at,
			Payload: &events.RunCreated{Team: "crew", Goal: "g", Cwd: "/r"}}),
		imp(commands.ImportedEvent{Type: events.TypeTaskCreated, TimeMs: at,
			Payload: &events.TaskCreated{TaskID: "t1", Role: "explorer", Agent: "explorer", Title: "t1", Cwd: "/r",
				Kind: events.TaskKindWorkflow, StepID: "s1"}}),
		imp(commands.ImportedEvent{Type: events.TypeTaskStarted, TimeMs: at, Payload: &events.TaskStarted{TaskID: "t1"}}),
		imp(commands.ImportedEvent{Type: events.TypeDelegateRequested, TimeMs: at + 1,
			Payload: &events.DelegateRequested{TaskID: "t1", SubID: "gc-1", Role: "explorer"}}),
		imp(commands.ImportedEvent{Type: events.TypeDelegateRejected, TimeMs: at + 1,
			Payload: &events.DelegateRejected{TaskID: "t1", SubID: "gc-1", Reason: events.ReasonSlotsExhausted,
				Message: "delegate rejected: nested spawn budget exhausted; 2/2 in flight"}}),
		imp(commands.ImportedEvent{Type: events.TypeDelegateRequested, TimeMs: at + 2,
			Payload: &events.DelegateRequested{TaskID: "t1", SubID: "gc-2", Role: "explorer"},
		}, commands.ImportedEvent{Type: events.TypeDelegateRejected, TimeMs: at + 2,
			Payload: &events.DelegateRejected{TaskID: "t1", SubID: "gc-2", Reason: events.ReasonDepthExceeded,
				Message: "delegate rejected: spawn depth 2 exceeds maxDepth 1"}}),
	})
	l = reopened(t, w, l, dir)

	imported := explainedDecisions(t, l, "delegate.request")
	require.Len(t, imported, 2, "gc-1's request, imported apart from its decision, decided nothing")
	for _, d := range imported {
		require.False(t, d.Drift, "#%d: %+v", d.Position, d.Differences)
		require.Equal(t, "not decided again: imported from picrew", d.Today, "#%d", d.Position)
	}
	require.Equal(t, "rejected: slots-exhausted", imported[0].Recorded)
	require.Equal(t, "slots-exhausted: delegate rejected: nested spawn budget exhausted; 2/2 in flight", imported[0].Rule)
	require.Equal(t, "rejected: depth-exceeded", imported[1].Recorded)
	requireExplainedAtAlike(t, l, imported)
}

// TestExplainLoneImportedAdmission: pi-crew's files can hold a delegation's admission with no request before it in
// the same record (the follower maps the admission line alone, with its reservation). It is an imported decision
// like the others: replay --explain names it as the system's admission, not decided again and never drift, where it
// left it unexplained.
func TestExplainLoneImportedAdmission(t *testing.T) {
	const run = "team_20261001090000_0000000000000001"
	imp := func(evs ...commands.ImportedEvent) decided {
		return decided{audittest.Admin, &commands.Import{Source: events.ForeignSourcePicrew, RunID: run, Events: evs}}
	}
	at := audittest.Epoch.UnixMilli()
	w, l, dir := decidedLog(t, []decided{
		imp(commands.ImportedEvent{Type: events.TypeRunCreated, TimeMs: at,
			Payload: &events.RunCreated{Team: "crew", Goal: "g", Cwd: "/r", BudgetTotal: audittest.Ptr[int64](1000)}}),
		imp(commands.ImportedEvent{Type: events.TypeTaskCreated, TimeMs: at,
			Payload: &events.TaskCreated{TaskID: "t1", Role: "explorer", Agent: "explorer", Title: "t1", Cwd: "/r",
				Kind: events.TaskKindWorkflow, StepID: "s1"}}),
		imp(commands.ImportedEvent{Type: events.TypeTaskStarted, TimeMs: at, Payload: &events.TaskStarted{TaskID: "t1"}}),
		imp(commands.ImportedEvent{Type: events.TypeDelegateAdmitted, TimeMs: at + 1,
			Payload: &events.DelegateAdmitted{TaskID: "t1", SubID: "gc-1", ChildDepth: 1, Role: "explorer",
				ReservedTokens: 100, TimeoutSec: 60, Deadline: at + 1 + 60_000, Cwd: "/r", Title: "delegate: gc-1"},
		}, commands.ImportedEvent{Type: events.TypeBudgetReserved, TimeMs: at + 1,
			Payload: &events.BudgetReserved{TaskID: "t1", SubID: "gc-1", Tokens: 100, GrantedTokens: 1000}}),
	})
	l = reopened(t, w, l, dir)

	imported := explainedDecisions(t, l, "delegate.request")
	require.Len(t, imported, 1, "the lone admission is a decision")
	d := imported[0]
	require.False(t, d.Drift, "%+v", d.Differences)
	require.Equal(t, "gc-1", d.Subject)
	require.Equal(t, "admitted gc-1, reserved 100", d.Recorded)
	require.Equal(t, "not decided again: imported from picrew", d.Today)
	require.Equal(t, "admitted", d.Rule)
	requireExplainedAtAlike(t, l, imported)
}
