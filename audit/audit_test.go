package audit

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// TestCheckFindsBrokenInvariants writes decided events, then hand-made
// ones that break an invariant each, and expects Check to name the
// position of each.
func TestCheckFindsBrokenInvariants(t *testing.T) {
	const run = "team_20261001090000_0000000000000001"
	w, l, dir := decidedLog(t, []decided{
		{audittest.Admin, &commands.RunCreate{RunID: run, Team: "crew", Cwd: "/srv", BudgetTotal: new(int64(1000))}},
		{audittest.Orchestrator, &commands.RunTransition{RunID: run, To: "running"}},
		{audittest.Orchestrator, &commands.TaskCreate{RunID: run, TaskID: "t1", Role: "explorer", Agent: "explorer", StepID: "s"}},
		{audittest.Orchestrator, &commands.TaskTransition{RunID: run, TaskID: "t1", To: "running"}},
		{audittest.Worker("t1"), &commands.DelegateRequest{RunID: run, TaskID: "t1", Prompt: "p", BudgetTokens: audittest.Ptr[int64](100)}},
		{audittest.Orchestrator, &commands.DelegateSettle{RunID: run, SubID: "gc-00000001", Outcome: commands.OutcomeOK}},
	})
	head, _ := l.Head()
	// A second terminal event for the same delegation.
	second := events.DelegateFailed{TaskID: "t1", SubID: "gc-00000001"}
	require.NoError(t, w.Raw(events.Event{Stream: run, Type: events.TypeDelegateFailed, Payload: &second}))
	// A terminal event for a delegation never admitted.
	ghost := events.DelegateCompleted{TaskID: "t1", SubID: "gc-ghost"}
	require.NoError(t, w.Raw(events.Event{Stream: run, Type: events.TypeDelegateCompleted, Payload: &ghost}))
	l = reopened(t, w, l, dir)
	rep, err := Check(l, nil)
	require.NoError(t, err)
	require.Len(t, rep.Problems, 3, "the two events, then the end state")
	require.Equal(t, head+1, rep.Problems[0].Position)
	require.Equal(t, InvariantTerminal, rep.Problems[0].Invariant)
	require.Equal(t, head+2, rep.Problems[1].Position)
	require.Contains(t, rep.Problems[1].Detail, "never admitted")

	one, err := Verify(l, nil)
	require.NoError(t, err)
	require.Equal(t, rep, one.Check, "the one-pass verify finds the same problems")
}

func TestDiffPaths(t *testing.T) {
	a := map[string]any{"runs": []any{map[string]any{"status": "running", "n": 1}}, "x": true}
	b := map[string]any{"runs": []any{map[string]any{"status": "completed", "n": 1}, 2}, "y": false}
	d, err := Diff(a, b)
	require.NoError(t, err)
	require.Equal(t, []Difference{
		{"$.runs[0].status", `"running"`, `"completed"`},
		{"$.runs[1]", absent, "2"},
		{"$.x", "true", absent},
		{"$.y", absent, "false"},
	}, d)
}

// TestDiffAtMostListsTheFirstAndCountsAll: DiffAtMost lists the first most differences of Diff's, in its order, and
// counts every one; most <= 0 lists them all.
func TestDiffAtMostListsTheFirstAndCountsAll(t *testing.T) {
	a := map[string]any{"runs": []any{map[string]any{"status": "running", "n": 1}}, "x": true}
	b := map[string]any{"runs": []any{map[string]any{"status": "completed", "n": 1}, 2}, "y": false}
	every, err := Diff(a, b)
	require.NoError(t, err)
	require.Len(t, every, 4)
	for _, c := range []struct{ most, listed int }{{-1, 4}, {0, 4}, {1, 1}, {3, 3}, {4, 4}, {5, 4}} {
		t.Run(strconv.Itoa(c.most), func(t *testing.T) {
			d, err := DiffAtMost(a, b, c.most)
			require.NoError(t, err)
			require.Equal(t, Differences{Listed: every[:c.listed], Total: 4}, d)
		})
	}
	d, err := DiffAtMost(a, a, 1)
	require.NoError(t, err)
	require.Zero(t, d.Total)
	require.Empty(t, d.Listed)
}

// TestExplainScenario: every decision of the engine-written scenario is
// re-run without drift, and each kind of decision is covered.
func TestExplainScenario(t *testing.T) {
	dir := t.TempDir()
	audittest.Scenario(t, dir)
	l, err := Open(dir)
	require.NoError(t, err)
	defer l.Close()
	res, err := Replay(l, ReplayOptions{Explain: true})
	require.NoError(t, err)
	require.Zero(t, res.Drift())
	kinds := map[string]int{}
	for _, d := range res.Decisions {
		kinds[d.Command]++
	}
	require.Equal(t, map[string]int{"engine.configure": 2, "delegate.request": 8, "delegate.settle": 3, "delegate.expire": 1}, kinds)
}

// TestOpenRefusesMissingStore: a directory that does not exist, or holds no store, is refused (ErrNoStore), and one
// that exists is left as it was: Pebble's open, even read-only, wrote its LOCK file there, and a directory that was
// empty (one a restore is about to copy into, one a killed copy left) no longer was.
func TestOpenRefusesMissingStore(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "none"))
	require.ErrorIs(t, err, ErrNoStore)
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, ".crewlog-checkpoint-1"), 0o700))
	_, err = Open(dir)
	require.ErrorIs(t, err, ErrNoStore)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "nothing was written in %s", dir)
}

// TestVerifyMatchesCheck: the one-pass Verify finds what Verify then Check
// find, on a clean scenario and on a log with broken invariants.
func TestVerifyMatchesCheck(t *testing.T) {
	dir := t.TempDir()
	audittest.Scenario(t, dir)
	l, err := Open(dir)
	require.NoError(t, err)
	defer l.Close()
	want, err := Check(l, nil)
	require.NoError(t, err)
	store, err := l.Verify(nil)
	require.NoError(t, err)
	var calls int
	got, err := Verify(l, &VerifyOptions{Progress: func(done, total uint64) { calls++ }})
	require.NoError(t, err)
	require.Equal(t, want, got.Check)
	require.Equal(t, store, got.Store)
	require.Positive(t, calls)
	require.Equal(t, store.Head, got.Check.Events)
}

// TestCheckFindsReservationBeyondGrant hand-writes budget.reserved events
// that a budget bug would: one above what remained of the grant, and, in
// nested budget mode, one that seeds a grandchild with the whole run budget
// instead of its own reservation. crewctl verify must name both.
func TestCheckFindsReservationBeyondGrant(t *testing.T) {
	const run = "team_20261001090000_0000000000000002"
	cfg := projections.DefaultConfig()
	cfg.BudgetMode = events.BudgetModeNested
	w, l, dir := decidedLog(t, []decided{
		{audittest.Admin, &commands.Configure{Config: cfg}},
		{audittest.Admin, &commands.RunCreate{RunID: run, Team: "crew", Cwd: "/srv", BudgetTotal: new(int64(1000))}},
		{audittest.Orchestrator, &commands.RunTransition{RunID: run, To: "running"}},
		{audittest.Orchestrator, &commands.TaskCreate{RunID: run, TaskID: "t1", Role: "executor", Agent: "executor", StepID: "s"}},
		{audittest.Orchestrator, &commands.TaskTransition{RunID: run, TaskID: "t1", To: "running"}},
		{audittest.Worker("t1"), &commands.DelegateRequest{RunID: run, TaskID: "t1", Prompt: "p", BudgetTokens: audittest.Ptr[int64](600)}},
		{audittest.Orchestrator, &commands.DelegateSpawned{RunID: run, SubID: "gc-00000001", PID: 7}},
	})
	head, _ := l.Head()
	// 500 more from t1, with 400 left of its grant of 1000.
	require.NoError(t, w.Raw(events.Event{Stream: run, Type: events.TypeBudgetReserved,
		Payload: &events.BudgetReserved{TaskID: "t1", SubID: "gc-x", Tokens: 500, GrantedTokens: 1000}}))
	// The grandchild seeded with the run's budgetTotal (picrew's rule) in
	// nested mode, although its parent reserved 600 for it.
	require.NoError(t, w.Raw(events.Event{Stream: run, Type: events.TypeBudgetReserved,
		Payload: &events.BudgetReserved{TaskID: "gc-00000001", SubID: "gc-y", Tokens: 100, GrantedTokens: 1000}}))
	l = reopened(t, w, l, dir)
	rep, err := Verify(l, nil)
	require.NoError(t, err)
	require.Len(t, rep.Check.Problems, 2)
	require.Equal(t, Problem{Position: head + 1, Run: run, Subject: "t1", Invariant: InvariantReservation,
		Detail: "reserved 500 with 400 remaining (1000 granted - 600 spent)"}, rep.Check.Problems[0])
	require.Equal(t, Problem{Position: head + 2, Run: run, Subject: "gc-00000001", Invariant: InvariantReservation,
		Detail: "nested budget mode: shadow seeded with 1000, its own reservation was 600"}, rep.Check.Problems[1])
}

// decided is one command a test log records, decided by today's code.
type decided struct {
	actor events.Actor
	cmd   commands.Command
}

// decidedLog opens a store in a temporary directory and records steps in it.
func decidedLog(t *testing.T, steps []decided) (*audittest.World, *eventlog.Log, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	l, err := eventlog.Open(dir, nil)
	require.NoError(t, err)
	w := audittest.NewWorld(l, audittest.Epoch.UnixNano())
	for _, c := range steps {
		_, err := w.Do(c.actor, c.cmd)
		require.NoError(t, err)
	}
	return w, l, dir
}

// reopened writes what w holds, closes l and opens the store as audit does.
func reopened(t *testing.T, w *audittest.World, l *eventlog.Log, dir string) *eventlog.Log {
	t.Helper()
	require.NoError(t, w.Flush())
	require.NoError(t, l.Close())
	l, err := Open(dir)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}
