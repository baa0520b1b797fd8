package commands

import (
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// The fixtures of this file are shared by the tests of usage, mailbox,
// steer, ask, credential and params; their names start with fx so they
// cannot collide with other test files of the package.

const fxRun = "team_20261001000000_0123456789abcdef"

// fxNow is the env clock of every decision: a fixed instant, unix ns.
var fxNow = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC).UnixNano()

// fxLog builds a state by applying events, one second apart, ending well
// before fxNow.
type fxLog struct {
	t   *testing.T
	s   *projections.State
	pos uint64
	ids int // ids minted by run, so they never repeat within a log
}

func fxNew(t *testing.T) *fxLog { return &fxLog{t: t, s: projections.New()} }

func (l *fxLog) add(typ string, p any) *fxLog { return l.addTo(fxRun, typ, p) }

func (l *fxLog) addTo(stream, typ string, p any) *fxLog {
	l.pos++
	projections.Apply(l.s, events.Event{
		Position: l.pos, Stream: stream, Type: typ, SchemaVersion: events.SchemaVersion(typ),
		Time: fxNow - int64(time.Hour) + int64(l.pos)*int64(time.Second), Payload: p,
	})
	return l
}

// run decides cmd with a fresh env and applies its events; it must be
// accepted.
func (l *fxLog) run(cmd Command) Decision {
	l.t.Helper()
	env := fxEnv()
	env.Now = fxNow - int64(time.Minute)
	env.NewID = func() string { l.ids++; return fmt.Sprintf("l%d", l.ids) }
	dec, err := Decide(l.s, cmd, env)
	require.NoError(l.t, err)
	l.apply(dec)
	return dec
}

func (l *fxLog) apply(dec Decision) {
	for _, ev := range dec.Events {
		l.pos++
		ev.Position = l.pos
		projections.Apply(l.s, ev)
	}
}

// fxRunning is a running run in /w with the workflow task 02_exec running.
func fxRunning(t *testing.T, budgetTotal int64) *fxLog {
	l := fxNew(t)
	l.add(events.TypeRunCreated, &events.RunCreated{Team: "t", Goal: "g", Cwd: "/w",
		BudgetTotal: optBudget(budgetTotal)})
	l.add(events.TypeRunRunning, &events.RunRunning{})
	return l.task("02_exec", projections.TaskRunning)
}

// task adds a workflow task and moves it to st (queued, running, waiting,
// completed).
func (l *fxLog) task(id string, st projections.TaskStatus) *fxLog {
	l.add(events.TypeTaskCreated, &events.TaskCreated{TaskID: id, Role: "executor", Agent: "executor", Title: id,
		Cwd: "/w", DependsOn: []string{}, StepID: "s-" + id})
	if st == projections.TaskQueued {
		return l
	}
	l.add(events.TypeTaskStarted, &events.TaskStarted{TaskID: id})
	switch st {
	case projections.TaskWaiting:
		l.add(events.TypeTaskWaiting, &events.TaskWaiting{TaskID: id, QuestionID: "q-" + id})
		l.add(events.TypeAskRequested, &events.AskRequested{TaskID: id, QuestionID: "q-" + id, Question: "?"})
	case projections.TaskCompleted:
		l.add(events.TypeTaskCompleted, &events.TaskCompleted{TaskID: id})
	}
	return l
}

// delegation admits an unmetered delegation of parent at childDepth.
func (l *fxLog) delegation(parent, sub string, childDepth int) *fxLog {
	l.add(events.TypeDelegateRequested, &events.DelegateRequested{TaskID: parent, SubID: sub, Role: "explorer"})
	return l.add(events.TypeDelegateAdmitted, &events.DelegateAdmitted{TaskID: parent, SubID: sub,
		ChildDepth: childDepth, Role: "explorer", Unmetered: true, TimeoutSec: 900, Deadline: fxNow/1e6 + 900_000,
		Cwd: "/w", Title: "delegate: " + sub})
}

// fxEnv is the fixed env of a decision: fxNow, ids id1, id2, ...
func fxEnv() Env {
	n := 0
	return Env{
		Config: projections.DefaultConfig(), Now: fxNow, CommandID: "cmd-1",
		Actor: events.Actor{Role: events.RoleOrchestrator},
		NewID: func() string { n++; return fmt.Sprintf("id%d", n) },
	}
}

// fxMsgID is the n-th message id minted under fxEnv with prefix.
func fxMsgID(prefix string, n int) string {
	return fmt.Sprintf("%s_%s_id%d", prefix, strconv.FormatInt(fxNow/1e6, 36), n)
}

// fxE is an expected event: its type and exact payload.
type fxE struct {
	typ string
	p   any
}

// fxDecide decides cmd under fxEnv, checks that the state was not touched
// and that every event carries the env's envelope on the run's stream.
func fxDecide(t *testing.T, s *projections.State, cmd Command) (Decision, error) {
	t.Helper()
	before := s.Clone()
	env := fxEnv()
	dec, err := Decide(s, cmd, env)
	require.Equal(t, before, s, "Decide must not modify the state")
	for _, ev := range dec.Events {
		require.Equal(t, fxRun, ev.Stream)
		require.Equal(t, env.Now, ev.Time)
		require.Equal(t, env.CommandID, ev.CommandID)
		require.Equal(t, env.Actor, ev.Actor)
		require.Equal(t, events.SchemaVersion(ev.Type), ev.SchemaVersion)
		got, ok := events.TypeOf(ev.Payload)
		require.True(t, ok)
		require.Equal(t, ev.Type, got, "payload type must match the event type")
	}
	return dec, err
}

func fxRequireEvents(t *testing.T, got []events.Event, want ...fxE) {
	t.Helper()
	require.Len(t, got, len(want), "events: %v", fxTypes(got))
	for i, w := range want {
		require.Equal(t, w.typ, got[i].Type, "event %d", i)
		require.Equal(t, w.p, got[i].Payload, "event %d (%s)", i, w.typ)
	}
}

func fxTypes(evs []events.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
	}
	return out
}

// fxRejected requires a rejection with code and reason, and that it records
// no event.
func fxRejected(t *testing.T, dec Decision, err error, code, reason, msg string) {
	t.Helper()
	var rej *RejectedError
	require.ErrorAs(t, err, &rej)
	require.Equal(t, code, rej.Code, rej.Message)
	require.Equal(t, reason, rej.Reason, rej.Message)
	if msg != "" {
		require.Contains(t, rej.Message, msg)
	}
	require.Empty(t, dec.Events, "a rejection of this kind records nothing")
	require.Nil(t, dec.Result)
}

func TestTaskUsageReplacesLastReport(t *testing.T) {
	l := fxRunning(t, 0).task("03_test", projections.TaskRunning)
	l.run(&TaskUsage{RunID: fxRun, TaskID: "03_test", Input: 100, Output: 50, CacheRead: 1000, CacheWrite: 5})
	l.run(&TaskUsage{RunID: fxRun, TaskID: "02_exec", Input: 10, Output: 20, CacheRead: 30, CacheWrite: 40,
		Cost: 0.5, Turns: 3})

	dec, err := fxDecide(t, l.s, &TaskUsage{RunID: fxRun, TaskID: "02_exec", Input: 11, Output: 21, CacheRead: 31,
		CacheWrite: 41, Cost: 0.6, Turns: 4})
	require.NoError(t, err)
	fxRequireEvents(t, dec.Events, fxE{events.TypeTaskUsage, &events.TaskUsage{
		TaskID: "02_exec", Input: 11, Output: 21, CacheRead: 31, CacheWrite: 41, Cost: 0.6, Turns: 4}})
	// 03_test: 155; 02_exec: 11+21+41 = 73 (cacheRead does not count).
	require.Equal(t, UsageResult{OK: true, TaskID: "02_exec", BudgetUsed: 228}, dec.Result)
	l.apply(dec)
	run, _ := l.s.Run(fxRun)
	require.Equal(t, int64(228), run.BudgetUsed, "the decision's sum agrees with the projection's")
}

func TestTaskUsageRejections(t *testing.T) {
	l := fxRunning(t, 0)
	tests := []struct {
		name               string
		cmd                TaskUsage
		code, reason, text string
	}{
		{"negative input", TaskUsage{RunID: fxRun, TaskID: "02_exec", Input: -1}, CodeBadParams, "invalid-params",
			"task.usage: input"},
		{"negative cacheWrite", TaskUsage{RunID: fxRun, TaskID: "02_exec", CacheWrite: -5}, CodeBadParams,
			"invalid-params", "0.."},
		{"negative turns", TaskUsage{RunID: fxRun, TaskID: "02_exec", Turns: -1}, CodeBadParams, "invalid-params",
			"task.usage: input, output, cacheRead, cacheWrite and turns must be integers in 0..1099511627776"},
		{"huge output", TaskUsage{RunID: fxRun, TaskID: "02_exec", Output: MaxUsageTokens + 1}, CodeBadParams,
			"invalid-params", ""},
		{"negative cost", TaskUsage{RunID: fxRun, TaskID: "02_exec", Cost: -0.1}, CodeBadParams,
			"invalid-params", "cost"},
		{"NaN cost", TaskUsage{RunID: fxRun, TaskID: "02_exec", Cost: math.NaN()}, CodeBadParams, "invalid-params",
			"task.usage: cost must be a finite, non-negative number"},
		{"infinite cost", TaskUsage{RunID: fxRun, TaskID: "02_exec", Cost: math.Inf(1)}, CodeBadParams,
			"invalid-params", "cost"},
		{"no run", TaskUsage{RunID: "nope", TaskID: "02_exec"}, CodeNoManifest, "no-manifest",
			`run "nope" not found`},
		{"no task", TaskUsage{RunID: fxRun, TaskID: "nope"}, CodeNoTask, "no-task", `task "nope" not found`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dec, err := fxDecide(t, l.s, &tc.cmd)
			fxRejected(t, dec, err, tc.code, tc.reason, tc.text)
		})
	}
}

func TestTaskUsageBudgetWarningOnce(t *testing.T) {
	l := fxRunning(t, 1000)
	dec, err := fxDecide(t, l.s, &TaskUsage{RunID: fxRun, TaskID: "02_exec", Input: 799})
	require.NoError(t, err)
	require.Equal(t, []string{events.TypeTaskUsage, events.TypeTaskBudgetFairShare}, fxTypes(dec.Events),
		"799 < 0.8·1000, but one task above half of the budget is flagged")
	l.apply(dec)

	dec, err = fxDecide(t, l.s, &TaskUsage{RunID: fxRun, TaskID: "02_exec", Input: 700, Output: 50, CacheRead: 999,
		CacheWrite: 50})
	require.NoError(t, err)
	fxRequireEvents(t, dec.Events,
		fxE{events.TypeTaskUsage, &events.TaskUsage{TaskID: "02_exec", Input: 700, Output: 50, CacheRead: 999,
			CacheWrite: 50}},
		fxE{events.TypeRunBudgetWarning, &events.RunBudgetWarning{BudgetTotal: 1000, BudgetUsed: 800,
			Threshold: "warning"}})
	require.Equal(t, UsageResult{OK: true, TaskID: "02_exec", BudgetUsed: 800, Warning: true}, dec.Result)
	l.apply(dec)

	dec, err = fxDecide(t, l.s, &TaskUsage{RunID: fxRun, TaskID: "02_exec", Input: 900})
	require.NoError(t, err)
	require.Equal(t, []string{events.TypeTaskUsage}, fxTypes(dec.Events), "the warning is recorded once")
}

// A run that sets no thresholds is warned at 0.8 and aborted at 0.95 of its budgetTotal (D§2.1, pi-crew's
// `budgetWarning ?? 0.8`, `budgetAbort ?? 0.95`): each default holds at its fraction exactly, a token below it
// reaches nothing.
func TestTaskUsageDefaultThresholds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		input int64
		want  []string
	}{
		{"below the warning", 799, []string{events.TypeTaskUsage, events.TypeTaskBudgetFairShare}},
		{"at the warning", 800,
			[]string{events.TypeTaskUsage, events.TypeRunBudgetWarning, events.TypeTaskBudgetFairShare}},
		{"below the abort", 949,
			[]string{events.TypeTaskUsage, events.TypeRunBudgetWarning, events.TypeTaskBudgetFairShare}},
		{"at the abort", 950,
			[]string{events.TypeTaskUsage, events.TypeRunBudgetAbort, events.TypeTaskCancelled, events.TypeRunFailed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := fxRunning(t, 1000)
			dec, err := fxDecide(t, l.s, &TaskUsage{RunID: fxRun, TaskID: "02_exec", Input: tc.input})
			require.NoError(t, err)
			require.Equal(t, tc.want, fxTypes(dec.Events), "%d of a budget of 1000", tc.input)
		})
	}
}

func TestTaskUsageBudgetSkipped(t *testing.T) {
	for _, tc := range []struct {
		name string
		rc   events.RunCreated
	}{
		{"no budgetTotal", events.RunCreated{Team: "t", Goal: "g", Cwd: "/w"}},
		{"unlimited", events.RunCreated{Team: "t", Goal: "g", Cwd: "/w", BudgetTotal: new(int64(10)),
			BudgetUnlimited: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := fxNew(t).add(events.TypeRunCreated, &tc.rc).add(events.TypeRunRunning, &events.RunRunning{})
			l.task("02_exec", projections.TaskRunning)
			dec, err := fxDecide(t, l.s, &TaskUsage{RunID: fxRun, TaskID: "02_exec", Input: 1_000_000})
			require.NoError(t, err)
			require.Equal(t, []string{events.TypeTaskUsage}, fxTypes(dec.Events))
		})
	}
}

func TestTaskUsageCustomThresholds(t *testing.T) {
	l := fxNew(t).add(events.TypeRunCreated, &events.RunCreated{Team: "t", Goal: "g", Cwd: "/w",
		BudgetTotal: new(int64(1000)), BudgetWarning: new(0.5), BudgetAbort: new(0.6)})
	l.task("02_exec", projections.TaskRunning)
	dec, err := fxDecide(t, l.s, &TaskUsage{RunID: fxRun, TaskID: "02_exec", Input: 500})
	require.NoError(t, err)
	require.Equal(t, []string{events.TypeTaskUsage, events.TypeRunBudgetWarning}, fxTypes(dec.Events))
	dec, err = fxDecide(t, l.s, &TaskUsage{RunID: fxRun, TaskID: "02_exec", Input: 600})
	require.NoError(t, err)
	require.Equal(t, []string{events.TypeTaskUsage, events.TypeRunBudgetAbort,
		events.TypeTaskCancelled, events.TypeRunFailed}, fxTypes(dec.Events),
		"a queued run may fail; a report that crosses both thresholds only aborts")
}

func TestTaskUsageBudgetAbort(t *testing.T) {
	l := fxRunning(t, 1000).
		task("01_plan", projections.TaskCompleted).
		task("03_wait", projections.TaskWaiting).
		task("04_next", projections.TaskQueued).
		delegation("02_exec", "gc-a", 2).
		delegation("02_exec", "gc-b", 2)
	l.add(events.TypeDelegateCancelRequested, &events.DelegateCancelRequested{TaskID: "02_exec", SubID: "gc-b"})
	l.add(events.TypeRunBudgetWarning, &events.RunBudgetWarning{BudgetTotal: 1000, BudgetUsed: 800,
		Threshold: "warning"})

	dec, err := fxDecide(t, l.s, &TaskUsage{RunID: fxRun, TaskID: "02_exec", Input: 950})
	require.NoError(t, err)
	fxRequireEvents(t, dec.Events,
		fxE{events.TypeTaskUsage, &events.TaskUsage{TaskID: "02_exec", Input: 950}},
		fxE{events.TypeRunBudgetAbort, &events.RunBudgetAbort{BudgetTotal: 1000, BudgetUsed: 950,
			Threshold: "abort"}},
		fxE{events.TypeTaskCancelled, &events.TaskCancelled{TaskID: "02_exec", Reason: ReasonBudgetAbort}},
		fxE{events.TypeAskTimedOut, &events.AskTimedOut{TaskID: "03_wait", QuestionID: "q-03_wait"}},
		fxE{events.TypeTaskCancelled, &events.TaskCancelled{TaskID: "03_wait", Reason: ReasonBudgetAbort}},
		fxE{events.TypeTaskSkipped, &events.TaskSkipped{TaskID: "04_next", Reason: ReasonBudgetAbort}},
		fxE{events.TypeDelegateCancelRequested, &events.DelegateCancelRequested{TaskID: "02_exec", SubID: "gc-a",
			Reason: ReasonBudgetAbort}},
		fxE{events.TypeRunFailed, &events.RunFailed{Reason: ReasonBudgetAbort}},
	)
	require.Equal(t, UsageResult{OK: true, TaskID: "02_exec", BudgetUsed: 950, Aborted: true}, dec.Result)

	l.apply(dec)
	run, _ := l.s.Run(fxRun)
	require.Equal(t, projections.RunFailed, run.Status)
	require.True(t, run.BudgetAborted)
	for id, st := range map[string]projections.TaskStatus{
		"01_plan": projections.TaskCompleted, "02_exec": projections.TaskCancelled,
		"03_wait": projections.TaskCancelled, "04_next": projections.TaskSkipped, "gc-a": projections.TaskQueued,
		"gc-b": projections.TaskQueued,
	} {
		task, _ := l.s.Task(fxRun, id)
		require.Equal(t, st, task.Status, "%s: shadow tasks follow their delegations", id)
	}
	d, _ := l.s.Delegation(fxRun, "gc-a")
	require.True(t, d.CancelRequested)

	dec, err = fxDecide(t, l.s, &TaskUsage{RunID: fxRun, TaskID: "02_exec", Input: 990})
	require.NoError(t, err)
	require.Equal(t, []string{events.TypeTaskUsage}, fxTypes(dec.Events), "the abort is recorded once")
}

func TestTaskUsageAbortOfACompletedRunDoesNotFailIt(t *testing.T) {
	l := fxRunning(t, 100)
	l.add(events.TypeTaskCompleted, &events.TaskCompleted{TaskID: "02_exec"})
	l.add(events.TypeRunCompleted, &events.RunCompleted{})
	dec, err := fxDecide(t, l.s, &TaskUsage{RunID: fxRun, TaskID: "02_exec", Output: 100})
	require.NoError(t, err)
	require.Equal(t, []string{events.TypeTaskUsage, events.TypeRunBudgetAbort},
		fxTypes(dec.Events), "completed → failed is not a D§2.2 transition")
}

// A run aborted on its budget and reopened by its orchestrator (failed → running is a D§2.2 transition) is held to
// the same budget: a report that reaches the abort threshold aborts it again. Only while the run stays ended does a
// report after the abort record just itself (a cancelled task's final report).
func TestTaskUsageAbortsAReopenedRunAgain(t *testing.T) {
	l := fxRunning(t, 1000)
	l.run(&TaskUsage{RunID: fxRun, TaskID: "02_exec", Input: 950})
	run, _ := l.s.Run(fxRun)
	require.True(t, run.BudgetAborted)
	require.Equal(t, projections.RunFailed, run.Status)
	l.run(&TaskUsage{RunID: fxRun, TaskID: "02_exec", Input: 960})

	l.run(&RunTransition{RunID: fxRun, To: string(projections.RunRunning)})
	l.run(&TaskCreate{RunID: fxRun, TaskID: "05_more", Role: "executor", Agent: "executor", Title: "more", Cwd: "/w"})
	l.run(&TaskTransition{RunID: fxRun, TaskID: "05_more", To: string(projections.TaskRunning)})
	l.run(&TaskCreate{RunID: fxRun, TaskID: "06_later", Role: "executor", Agent: "executor",
		Title: "later", Cwd: "/w"})

	cmd := &TaskUsage{RunID: fxRun, TaskID: "05_more", Input: 5000}
	require.True(t, cmd.windsDown(l.s),
		"the report that aborts the reopened run winds it down, as the first abort did")
	dec, err := fxDecide(t, l.s, cmd)
	require.NoError(t, err)
	require.Equal(t, []string{events.TypeTaskUsage, events.TypeRunBudgetAbort, events.TypeTaskCancelled,
		events.TypeTaskSkipped, events.TypeRunFailed}, fxTypes(dec.Events))
	require.Equal(t, &events.RunBudgetAbort{BudgetTotal: 1000, BudgetUsed: 5960, Threshold: "abort"},
		dec.Events[1].Payload)
	require.Equal(t, UsageResult{OK: true, TaskID: "05_more", BudgetUsed: 5960, Aborted: true}, dec.Result)
	l.apply(dec)
	run, _ = l.s.Run(fxRun)
	require.Equal(t, projections.RunFailed, run.Status)
	for id, st := range map[string]projections.TaskStatus{"05_more": projections.TaskCancelled,
		"06_later": projections.TaskSkipped} {
		task, _ := l.s.Task(fxRun, id)
		require.Equal(t, st, task.Status, id)
	}

	dec, err = fxDecide(t, l.s, &TaskUsage{RunID: fxRun, TaskID: "05_more", Input: 5001})
	require.NoError(t, err)
	require.Equal(t, []string{events.TypeTaskUsage}, fxTypes(dec.Events),
		"the run has ended again: its abort is recorded")
	require.False(t, (&TaskUsage{RunID: fxRun, TaskID: "05_more", Input: 5001}).windsDown(l.s))
}
