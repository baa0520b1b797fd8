package audit

import (
	"fmt"
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
	at := audittest.Epoch.UnixMilli()
	w, l, dir := decidedLog(t, append(importedTask(at), importedAdmission("gc-1", at+1)))
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

// TestExplainLoneImportedSettlement: pi-crew's files hold a delegation's end as its terminal line alone, with no
// result message before it (crewlog's own settlement opens with one). It is an imported decision like the others:
// replay --explain names it as the system's settlement, not decided again and never drift, where it left it
// unexplained.
func TestExplainLoneImportedSettlement(t *testing.T) {
	at := audittest.Epoch.UnixMilli()
	steps := importedTask(at)
	for i, typ := range []string{events.TypeDelegateCompleted, events.TypeDelegateTimedOut} {
		sub := fmt.Sprintf("gc-%d", i+1)
		settled := events.DelegateSettled{TaskID: "t1", SubID: sub, OK: typ == events.TypeDelegateCompleted}
		var payload any = (*events.DelegateCompleted)(&settled)
		if typ == events.TypeDelegateTimedOut {
			payload = (*events.DelegateTimedOut)(&settled)
		}
		steps = append(steps, importedAdmission(sub, at+1),
			picrewImport(commands.ImportedEvent{Type: typ, TimeMs: at + 2, Payload: payload}))
	}
	w, l, dir := decidedLog(t, steps)
	l = reopened(t, w, l, dir)

	settled := explainedDecisions(t, l, "delegate.settle")
	require.Len(t, settled, 2, "each lone terminal event is a decision")
	for i, want := range []string{"completed", "timed_out"} {
		d := settled[i]
		require.False(t, d.Drift, "%+v", d.Differences)
		require.Equal(t, fmt.Sprintf("gc-%d", i+1), d.Subject)
		require.Equal(t, want, d.Recorded)
		require.Equal(t, "not decided again: imported from picrew", d.Today)
		require.Equal(t, "usage 0 within reserved 100: no charge, no refund; slot freed", d.Rule)
	}
	requireExplainedAtAlike(t, l, settled)
}

// importedRun is the run the tests of lone imported decisions import.
const importedRun = "team_20261001090000_0000000000000001"

// picrewImport is an import of evs into importedRun, as pi-crew's follower sends one record.
func picrewImport(evs ...commands.ImportedEvent) decided {
	return decided{audittest.Admin, &commands.Import{Source: events.ForeignSourcePicrew, RunID: importedRun, Events: evs}}
}

// importedTask imports importedRun (budgetTotal 1000) and its workflow task t1, running, at (unix ms).
func importedTask(at int64) []decided {
	return []decided{
		picrewImport(commands.ImportedEvent{Type: events.TypeRunCreated, TimeMs: at,
			Payload: &events.RunCreated{Team: "crew", Goal: "g", Cwd: "/r", BudgetTotal: audittest.Ptr[int64](1000)}}),
		picrewImport(commands.ImportedEvent{Type: events.TypeTaskCreated, TimeMs: at,
			Payload: &events.TaskCreated{TaskID: "t1", Role: "explorer", Agent: "explorer", Title: "t1", Cwd: "/r",
				Kind: events.TaskKindWorkflow, StepID: "s1"}}),
		picrewImport(commands.ImportedEvent{Type: events.TypeTaskStarted, TimeMs: at, Payload: &events.TaskStarted{TaskID: "t1"}}),
	}
}

// importedAdmission imports t1's delegation sub admitted alone, with its reservation of 100 tokens, at (unix ms).
func importedAdmission(sub string, at int64) decided {
	return picrewImport(commands.ImportedEvent{Type: events.TypeDelegateAdmitted, TimeMs: at,
		Payload: &events.DelegateAdmitted{TaskID: "t1", SubID: sub, ChildDepth: 1, Role: "explorer",
			ReservedTokens: 100, TimeoutSec: 60, Deadline: at + 60_000, Cwd: "/r", Title: "delegate: " + sub},
	}, commands.ImportedEvent{Type: events.TypeBudgetReserved, TimeMs: at,
		Payload: &events.BudgetReserved{TaskID: "t1", SubID: sub, Tokens: 100, GrantedTokens: 1000}})
}

// TestExplainLoneImportedBudgetThreshold: pi-crew's files hold a run budget's threshold crossed as a line of its own
// (run.budget_warning, run.budget_abort), with no usage report before it in the record. It is an imported decision
// like the others: replay --explain names the threshold and its numbers as that system's, not decided again and
// never drift, where it left it unexplained.
func TestExplainLoneImportedBudgetThreshold(t *testing.T) {
	at := audittest.Epoch.UnixMilli()
	w, l, dir := decidedLog(t, append(importedTask(at),
		picrewImport(commands.ImportedEvent{Type: events.TypeRunBudgetWarning, TimeMs: at + 1,
			Payload: &events.RunBudgetWarning{BudgetTotal: 1000, BudgetUsed: 850, Threshold: "warning"}}),
		picrewImport(commands.ImportedEvent{Type: events.TypeRunBudgetAbort, TimeMs: at + 2,
			Payload: &events.RunBudgetAbort{BudgetTotal: 1000, BudgetUsed: 990, Threshold: "abort"}})))
	l = reopened(t, w, l, dir)

	crossed := explainedDecisions(t, l, "task.usage")
	require.Len(t, crossed, 2, "each lone threshold is a decision")
	for i, want := range []struct{ recorded, rule string }{
		{"budget warning", "run budget 850 of 1000 used >= the warning at 80%"},
		{"budget abort", "run budget 990 of 1000 used >= the abort at 95%"},
	} {
		d := crossed[i]
		require.False(t, d.Drift, "%+v", d.Differences)
		require.Equal(t, want.recorded, d.Recorded)
		require.Equal(t, "not decided again: imported from picrew", d.Today)
		require.Equal(t, want.rule, d.Rule)
	}
	requireExplainedAtAlike(t, l, crossed)
}
