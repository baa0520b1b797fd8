package commands

import (
	"math"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// Run budget enforcement defaults (D§2.1: fractions of budgetTotal used when
// the run leaves them unset).
const (
	DefaultBudgetWarning = 0.8
	DefaultBudgetAbort   = 0.95
	// MaxUsageTokens bounds each usage counter of a report, far above any
	// real run, so Σ usage over a run's tasks cannot overflow an int64.
	MaxUsageTokens = 1 << 40
	// ReasonBudgetAbort is the reason recorded on everything a budget abort
	// cancels, skips or fails.
	ReasonBudgetAbort = "budget-abort"
)

// TaskUsage reports a task's CUMULATIVE usage (each report replaces the
// last; it is not a delta) and enforces the run budget in the same decision
// (D§4.4 last bullet), so a report that crosses a threshold and the
// threshold's consequences commit together.
type TaskUsage struct {
	RunID      string
	TaskID     string
	Input      int64
	Output     int64
	CacheRead  int64
	CacheWrite int64
	Cost       float64
	Turns      int64
}

// Kind implements Command.
func (*TaskUsage) Kind() string { return "task.usage" }

// UsageResult is the answer to task.usage. BudgetUsed is the run's
// Σ input+output+cacheWrite after the report; Warning and Aborted say
// whether this report crossed the warning or abort threshold.
type UsageResult struct {
	OK         bool   `json:"ok"`
	TaskID     string `json:"taskId"`
	BudgetUsed int64  `json:"budgetUsed"`
	Warning    bool   `json:"budgetWarning,omitempty"`
	Aborted    bool   `json:"budgetAbort,omitempty"`
}

func (c *TaskUsage) decide(s *projections.State, env *Env) (Decision, error) {
	for _, n := range []int64{c.Input, c.Output, c.CacheRead, c.CacheWrite, c.Turns} {
		if n < 0 || n > MaxUsageTokens {
			return Decision{}, badParams("task.usage: input, output, cacheRead, cacheWrite and turns must be integers in 0..%d", int64(MaxUsageTokens))
		}
	}
	if math.IsNaN(c.Cost) || math.IsInf(c.Cost, 0) || c.Cost < 0 {
		return Decision{}, badParams("task.usage: cost must be a finite, non-negative number")
	}
	run, ok := s.Run(c.RunID)
	if !ok {
		return Decision{}, reject(CodeNoManifest, "no-manifest", "run %q not found", c.RunID)
	}
	t, ok := s.Task(c.RunID, c.TaskID)
	if !ok {
		return Decision{}, reject(CodeNoTask, "no-task", "task %q not found in run %q", c.TaskID, c.RunID)
	}
	u := projections.Usage{Input: c.Input, Output: c.Output, CacheRead: c.CacheRead, CacheWrite: c.CacheWrite, Cost: c.Cost, Turns: c.Turns}
	evs := []events.Event{env.event(c.RunID, events.TypeTaskUsage, &events.TaskUsage{
		TaskID: c.TaskID, Input: c.Input, Output: c.Output, CacheRead: c.CacheRead, CacheWrite: c.CacheWrite,
		Cost: c.Cost, Turns: c.Turns,
	})}
	// The projection keeps the run's sum incrementally; this report replaces
	// the task's previous totals, exactly as Apply will.
	used := run.BudgetUsed - t.Usage.Budgeted() + u.Budgeted()
	res := UsageResult{OK: true, TaskID: c.TaskID, BudgetUsed: used}
	if run.BudgetTotal <= 0 || run.BudgetUnlimited {
		return Decision{Events: evs, Result: res}, nil
	}
	budget := events.RunBudget{BudgetTotal: run.BudgetTotal, BudgetUsed: used}
	if !run.BudgetWarned && reached(used, run.BudgetTotal, run.BudgetWarning, DefaultBudgetWarning) {
		budget.Threshold = "warning"
		w := events.RunBudgetWarning(budget)
		evs = append(evs, env.event(c.RunID, events.TypeRunBudgetWarning, &w))
		res.Warning = true
	}
	if !run.BudgetAborted && reached(used, run.BudgetTotal, run.BudgetAbort, DefaultBudgetAbort) {
		budget.Threshold = "abort"
		a := events.RunBudgetAbort(budget)
		evs = append(evs, env.event(c.RunID, events.TypeRunBudgetAbort, &a))
		evs = append(evs, budgetAbort(s, env, run)...)
		res.Aborted = true
	}
	return Decision{Events: evs, Result: res}, nil
}

// reached reports whether used ≥ fraction·total, fraction defaulting to def
// when the run left it unset (0).
func reached(used, total int64, fraction, def float64) bool {
	if fraction <= 0 {
		fraction = def
	}
	return float64(used) >= fraction*float64(total)
}

// budgetAbort is what an abort does to the run (D§4.4): workflow tasks that
// were dispatched and are not terminal are cancelled, those never
// dispatched are skipped, every in-flight delegation is asked to cancel (its
// shadow task follows its delegation, so shadows are left alone here), and
// the run fails when the D§2.2 machine lets it.
func budgetAbort(s *projections.State, env *Env, run projections.Run) []events.Event {
	var evs []events.Event
	for _, t := range s.Tasks(run.RunID) {
		if t.Shadow() {
			continue
		}
		switch t.Status {
		case projections.TaskRunning, projections.TaskWaiting:
			evs = append(evs, env.event(run.RunID, events.TypeTaskCancelled,
				&events.TaskCancelled{TaskID: t.TaskID, Reason: ReasonBudgetAbort}))
		case projections.TaskQueued:
			evs = append(evs, env.event(run.RunID, events.TypeTaskSkipped,
				&events.TaskSkipped{TaskID: t.TaskID, Reason: ReasonBudgetAbort}))
		}
	}
	evs = append(evs, cancelInFlight(s, env, run.RunID, ReasonBudgetAbort)...)
	if run.Status != projections.RunFailed && contains(runTransitions[run.Status], projections.RunFailed) {
		evs = append(evs, env.event(run.RunID, events.TypeRunFailed, &events.RunFailed{Reason: ReasonBudgetAbort}))
	}
	return evs
}
