package audittest

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// Epoch is the scenario clock at its start.
var Epoch = time.Date(2026, 10, 1, 9, 0, 0, 0, time.UTC)

// Run ids of the scenario.
const (
	RunBudget    = "team_20261001090000_a1b2c3d4e5f60001"
	RunUnlimited = "team_20261001091500_a1b2c3d4e5f60002"
)

// SnapshotAt is the position of the snapshot the scenario leaves in the
// store (after the second engine.configured).
var SnapshotAt uint64

// clock is the engine clock of the scenario: it moves only when told to.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Scenario writes the recorded scenario into dir (which must not hold a
// store) with the real commands Engine, a clock that advances one second per
// command and counter ids, and returns the head position. It covers every
// decision replay --explain re-runs: admissions (metered and unmetered), the
// rejections slots-exhausted, budget-insufficient, role-denied and
// model-invalid, a settlement that charges usage over the reservation, an
// engine-clock expiry, a run cancellation and two config changes. It leaves
// a snapshot at SnapshotAt.
func Scenario(t testing.TB, dir string) uint64 {
	t.Helper()
	l, err := eventlog.Open(dir, nil)
	require.NoError(t, err)
	clk := &clock{now: Epoch}
	ids := 0
	var idMu sync.Mutex
	cfg := projections.Config{NestingEnabled: true, MaxDepth: 3, MaxSlots: 2,
		UnmeteredDelegates: events.UnmeteredAllow, SettleGraceSec: 30, WaitMethodsEnabled: true}
	eng, err := commands.Open(l, commands.Options{
		Clock: clk.Now,
		NewID: func() string {
			idMu.Lock()
			defer idMu.Unlock()
			ids++
			return fmt.Sprintf("%08d", ids)
		},
		Config: &cfg, SnapshotEvery: -1, ExpiryInterval: -1,
	})
	require.NoError(t, err)

	n := 0
	do := func(actor events.Actor, cmd commands.Command) commands.Reply {
		t.Helper()
		n++
		clk.advance(time.Second)
		r, err := eng.Submit(context.Background(), commands.Request{
			Principal: principalOf(actor, cmd), CommandID: fmt.Sprintf("cmd-%03d", n), Actor: actor, Command: cmd,
		})
		require.NoError(t, err)
		return r
	}
	admitted := func(r commands.Reply) {
		t.Helper()
		require.Nil(t, r.Rejected, "expected an admission")
	}
	rejected := func(r commands.Reply, reason string) {
		t.Helper()
		require.NotNil(t, r.Rejected, "expected a rejection")
		require.Equal(t, reason, r.Rejected.Reason)
	}
	str := Ptr[string]
	i64 := Ptr[int64]
	f64 := Ptr[float64]

	// Run 1: a metered run of 100,000 tokens.
	do(Admin, &commands.RunCreate{RunID: RunBudget, Team: "crew", Goal: "ship the parser", Cwd: "/srv/app",
		BudgetTotal: new(int64(100000))})
	do(Orchestrator, &commands.RunTransition{RunID: RunBudget, To: "running"})
	do(Orchestrator, &commands.TaskCreate{RunID: RunBudget, TaskID: "01_build", Role: "executor", Agent: "executor",
		Title: "build the parser", Cwd: "/srv/app", StepID: "build"})
	do(Orchestrator, &commands.TaskCreate{RunID: RunBudget, TaskID: "02_explore", Role: "explorer", Agent: "explorer",
		Title: "read the docs", Cwd: "/srv/app/docs", StepID: "explore"})
	do(Orchestrator, &commands.TaskTransition{RunID: RunBudget, TaskID: "01_build", To: "running"})
	do(Orchestrator, &commands.TaskTransition{RunID: RunBudget, TaskID: "02_explore", To: "running"})
	admitted(do(Worker("01_build"), &commands.DelegateRequest{RunID: RunBudget, TaskID: "01_build",
		Prompt: "map the parser package", Description: str("map parser"), Role: str("explorer"),
		BudgetTokens: i64(20000), TimeoutSec: f64(600), MaxTurns: Ptr(20)}))
	admitted(do(Worker("02_explore"), &commands.DelegateRequest{RunID: RunBudget, TaskID: "02_explore",
		Prompt: "summarise the grammar", Role: str("analyst"), BudgetTokens: i64(30000), TimeoutSec: f64(300)}))
	rejected(do(Worker("01_build"), &commands.DelegateRequest{RunID: RunBudget, TaskID: "01_build",
		Prompt: "list the tests", Role: str("explorer"), BudgetTokens: i64(1000)}), events.ReasonSlotsExhausted)
	do(Orchestrator, &commands.DelegateSpawned{RunID: RunBudget, SubID: "gc-00000001", PID: 4242})
	do(Orchestrator, &commands.DelegateSettle{RunID: RunBudget, SubID: "gc-00000001", Outcome: commands.OutcomeOK,
		Text: "the parser has three entry points", UsageTokens: i64(25000)})
	rejected(do(Worker("01_build"), &commands.DelegateRequest{RunID: RunBudget, TaskID: "01_build",
		Prompt: "rewrite the lexer", Role: str("explorer"), BudgetTokens: i64(90000)}),
		events.ReasonBudgetInsufficient)
	rejected(do(Worker("01_build"), &commands.DelegateRequest{RunID: RunBudget, TaskID: "01_build",
		Prompt: "review the diff", Role: str("reviewer")}), events.ReasonRoleDenied)
	next := cfg
	next.MaxSlots, next.ModelCatalog = 3, []string{"claude-sonnet-4"}
	do(Admin, &commands.Configure{Config: next})
	rejected(do(Worker("01_build"), &commands.DelegateRequest{RunID: RunBudget, TaskID: "01_build",
		Prompt: "try another model", Model: str("gpt-x"), BudgetTokens: i64(100)}), events.ReasonModelInvalid)
	admitted(do(Worker("01_build"), &commands.DelegateRequest{RunID: RunBudget, TaskID: "01_build",
		Prompt: "fix the failing test", Description: str("fix test"), Role: str("executor"),
		Model: str("claude-sonnet-4"), BudgetTokens: i64(10000)}))

	// The analyst (timeout 300 s, grace 30 s) is overdue: the engine clock
	// times it out.
	clk.advance(400 * time.Second)
	require.Equal(t, 1, eng.Tick(context.Background()))
	do(Orchestrator, &commands.TaskUsage{RunID: RunBudget, TaskID: "01_build", Input: 1000, Output: 2000})
	do(Orchestrator, &commands.DelegateSettle{RunID: RunBudget, SubID: "gc-00000008", Outcome: commands.OutcomeFailed,
		Text: "could not reproduce", UsageTokens: i64(5000)})
	do(Orchestrator, &commands.TaskTransition{RunID: RunBudget, TaskID: "01_build", To: "completed"})

	// Run 2: unlimited budget, so its delegation is unmetered; cancelling
	// the run asks the delegation to cancel.
	do(Admin, &commands.RunCreate{RunID: RunUnlimited, Team: "crew", Goal: "triage issues", Cwd: "/srv/triage",
		BudgetUnlimited: true})
	do(Orchestrator, &commands.RunTransition{RunID: RunUnlimited, To: "running"})
	do(Orchestrator, &commands.TaskCreate{RunID: RunUnlimited, TaskID: "01_triage", Role: "analyst", Agent: "analyst",
		Title: "triage", Cwd: "/srv/triage", StepID: "triage"})
	do(Orchestrator, &commands.TaskTransition{RunID: RunUnlimited, TaskID: "01_triage", To: "running"})
	admitted(do(Worker("01_triage"), &commands.DelegateRequest{RunID: RunUnlimited, TaskID: "01_triage",
		Prompt: "label the open issues", Role: str("explorer")}))
	do(Orchestrator, &commands.RunTransition{RunID: RunUnlimited, To: "cancelled", Reason: "operator stop"})
	do(Orchestrator, &commands.DelegateSettle{RunID: RunUnlimited, SubID: "gc-00000011",
		Outcome: commands.OutcomeCancelled, Text: "stopped"})
	do(Orchestrator, &commands.RunTransition{RunID: RunBudget, To: "completed", Summary: "parser shipped"})
	require.NoError(t, eng.Close())

	// The snapshot is taken here, after the fact, at a fixed position, so
	// the store is the same on every run (the engine's own snapshots are
	// taken in the background, at a position that depends on timing).
	s := projections.New()
	require.NoError(t, projections.Replay(s, l, 0))
	head := s.Position
	SnapshotAt = snapshotPosition(t, l)
	s = projections.New()
	require.NoError(t, projections.Replay(s, l, SnapshotAt))
	b, err := projections.EncodeSnapshot(s)
	require.NoError(t, err)
	require.NoError(t, l.SaveSnapshot(SnapshotAt, b))
	require.NoError(t, l.Close())
	return head
}

// snapshotPosition is the position of the second engine.configured.
func snapshotPosition(t testing.TB, l *eventlog.Log) uint64 {
	it := l.Read(1)
	defer it.Close()
	seen := 0
	for it.Next() {
		if it.Event().Type == events.TypeEngineConfigured {
			if seen++; seen == 2 {
				return it.Event().Position
			}
		}
	}
	require.NoError(t, it.Err())
	t.Fatal("audittest: no second engine.configured")
	return 0
}

// principalOf is the principal an actor acting on cmd's run authenticates
// as: the admin, the run's orchestrator or a worker of the run's task.
func principalOf(actor events.Actor, cmd commands.Command) events.Principal {
	var run string
	if f := reflect.ValueOf(cmd).Elem().FieldByName("RunID"); f.IsValid() {
		run = f.String()
	}
	switch actor.Role {
	case events.RoleOrchestrator:
		return events.OrchestratorPrincipal(run)
	case events.RoleWorker:
		return events.WorkerPrincipal(run, actor.TaskID)
	}
	return events.AdminPrincipal()
}
