package audittest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// DriftRun is the run of the drift log.
const DriftRun = "team_20261001100000_d1d2d3d4d5d60001"

// DriftAt is the position of the drifted decision's delegate.requested.
var DriftAt uint64

// Drift writes into dir a log whose every decision was made by today's code
// except one: with one slot configured and held, a second delegation was
// recorded as admitted (hand-made events appended with eventlog.Append), as
// an older policy without the slot check would have done. Today's code
// rejects it with slots-exhausted, so replay --explain must report drift.
func Drift(t testing.TB, dir string) {
	t.Helper()
	l, err := eventlog.Open(dir, nil)
	require.NoError(t, err)
	defer func() { require.NoError(t, l.Close()) }()
	w := NewWorld(l, Epoch.Add(time.Hour).UnixNano())
	cfg := projections.DefaultConfig()
	cfg.MaxSlots = 1
	must := func(_ commands.Decision, err error) {
		t.Helper()
		require.NoError(t, err)
	}
	must(w.Do(Admin, &commands.Configure{Config: cfg}))
	must(w.Do(Admin, &commands.RunCreate{RunID: DriftRun, Team: "crew", Goal: "old policy", Cwd: "/srv/old",
		BudgetTotal: new(int64(50000))}))
	must(w.Do(Orchestrator, &commands.RunTransition{RunID: DriftRun, To: "running"}))
	must(w.Do(Orchestrator, &commands.TaskCreate{RunID: DriftRun, TaskID: "01_lead", Role: "executor",
		Agent: "executor", Title: "lead", Cwd: "/srv/old", StepID: "lead"}))
	must(w.Do(Orchestrator, &commands.TaskTransition{RunID: DriftRun, TaskID: "01_lead", To: "running"}))
	must(w.Do(Worker("01_lead"), &commands.DelegateRequest{RunID: DriftRun, TaskID: "01_lead", Prompt: "first look",
		Role: Ptr("explorer"), BudgetTokens: Ptr[int64](1000)}))

	// The drifted decision: admitted although 1/1 slots are held.
	DriftAt = w.next
	sub := "gc-" + w.NewID()
	lead := Worker("01_lead")
	pol := &events.Policy{NestingEnabled: true, Trusted: true, ParentStatus: "running", ParentRole: "executor",
		Role: "explorer", Depth: 1, ChildDepth: 2, MaxDepth: cfg.MaxDepth, Held: 1, Capacity: 1, Metered: true,
		Granted: 50000, Spent: 1000, Requested: 2000, UnmeteredDelegates: events.UnmeteredAllow, CatalogSize: -1,
		TimeoutSec: 900}
	w.Now += w.Step
	at := w.Now
	require.NoError(t, w.Raw(
		events.Event{Stream: DriftRun, Type: events.TypeDelegateRequested, Time: at, Actor: lead,
			Payload: &events.DelegateRequested{TaskID: "01_lead", SubID: sub, Role: "explorer"}},
		events.Event{Stream: DriftRun, Type: events.TypeDelegateAdmitted, Time: at, Actor: lead,
			Payload: &events.DelegateAdmitted{TaskID: "01_lead", SubID: sub, ChildDepth: 2, Role: "explorer",
				ReservedTokens: 2000, TimeoutSec: 900, Deadline: at/1e6 + 900_000, Cwd: "/srv/old",
				Title: "delegate: " + sub, Prompt: "second look", ParentRole: "executor", Policy: pol}},
		events.Event{Stream: DriftRun, Type: events.TypeBudgetReserved, Time: at, Actor: lead,
			Payload: &events.BudgetReserved{TaskID: "01_lead", SubID: sub, Tokens: 2000, GrantedTokens: 50000}},
	))
	require.NoError(t, w.Flush())
	must(w.Do(Orchestrator, &commands.DelegateSettle{RunID: DriftRun, SubID: "gc-00000001",
		Outcome: commands.OutcomeOK, Text: "done", UsageTokens: Ptr[int64](1500)}))
}
