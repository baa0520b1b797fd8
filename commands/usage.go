package commands

import (
	"fmt"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// Run budget enforcement defaults (D§2.1: fractions of budgetTotal used when
// the run leaves them unset).
const (
	DefaultBudgetWarning = 0.8
	DefaultBudgetAbort   = 0.95
	// MaxUsageTokens bounds each usage counter of a report (events.MaxUsageTokens).
	MaxUsageTokens = events.MaxUsageTokens
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
// whether this report crossed the warning or abort threshold (one report
// that crosses both only aborts), FairShare whether it took the task above
// its fair share.
type UsageResult struct {
	OK         bool   `json:"ok"`
	TaskID     string `json:"taskId"`
	BudgetUsed int64  `json:"budgetUsed"`
	Warning    bool   `json:"budgetWarning,omitempty"`
	Aborted    bool   `json:"budgetAbort,omitempty"`
	FairShare  bool   `json:"budgetFairShare,omitempty"`
}

// countsProblem says what makes a report's counters ones task.usage refuses (a counter outside 0..MaxUsageTokens, a
// cost that is not a finite number ≥ 0), "" when there is nothing: an imported task.usage is held to the same.
func countsProblem(u events.TaskUsage) string {
	switch field, _ := events.UsageProblem(u); field {
	case "":
		return ""
	case "cost":
		return "task.usage: cost must be a finite, non-negative number"
	}
	return fmt.Sprintf("task.usage: input, output, cacheRead, cacheWrite and turns must be integers in 0..%d",
		int64(MaxUsageTokens))
}

func (c *TaskUsage) decide(s *projections.State, env *Env) (Decision, error) {
	if bad := countsProblem(events.TaskUsage{Input: c.Input, Output: c.Output, CacheRead: c.CacheRead,
		CacheWrite: c.CacheWrite, Cost: c.Cost, Turns: c.Turns}); bad != "" {
		return Decision{}, badParams("%s", bad)
	}
	run, ok := s.Run(c.RunID)
	if !ok {
		return Decision{}, reject(CodeNoManifest, "no-manifest", "run %q not found", c.RunID)
	}
	t, ok := s.Task(c.RunID, c.TaskID)
	if !ok {
		return Decision{}, reject(CodeNoTask, "no-task", "task %q not found in run %q", c.TaskID, c.RunID)
	}
	u := c.usage()
	evs := []events.Event{env.event(c.RunID, events.TypeTaskUsage, &events.TaskUsage{
		TaskID: c.TaskID, Input: c.Input, Output: c.Output, CacheRead: c.CacheRead, CacheWrite: c.CacheWrite,
		Cost: c.Cost, Turns: c.Turns,
	})}
	used, total, enforced := c.runBudget(run, t)
	res := UsageResult{OK: true, TaskID: c.TaskID, BudgetUsed: used}
	if !enforced {
		return Decision{Events: evs, Result: res}, nil
	}
	budget := events.RunBudget{BudgetTotal: total, BudgetUsed: used}
	// pi-crew's checkPerTaskBudget: an abort says it all; the warning and
	// the fair-share flag are for a run that goes on, which an aborted run
	// does not (a cancelled task's final report comes after the abort).
	if abortStands(run) {
		return Decision{Events: evs, Result: res}, nil
	}
	if reached(used, total, run.BudgetAbort, DefaultBudgetAbort) {
		budget.Threshold = "abort"
		a := events.RunBudgetAbort(budget)
		evs = append(evs, env.event(c.RunID, events.TypeRunBudgetAbort, &a))
		evs = append(evs, budgetAbort(s, env, run)...)
		res.Aborted = true
		return Decision{Events: evs, Result: res}, nil
	}
	if !run.BudgetWarned && reached(used, total, run.BudgetWarning, DefaultBudgetWarning) {
		budget.Threshold = "warning"
		w := events.RunBudgetWarning(budget)
		evs = append(evs, env.event(c.RunID, events.TypeRunBudgetWarning, &w))
		res.Warning = true
	}
	if overFairShare(u.Budgeted(), total) && !overFairShare(t.Usage.Budgeted(), total) {
		evs = append(evs, env.event(c.RunID, events.TypeTaskBudgetFairShare, &events.TaskBudgetFairShare{
			TaskID: c.TaskID, BudgetTotal: total, TaskUsage: u.Budgeted(),
		}))
		res.FairShare = true
	}
	return Decision{Events: evs, Result: res}, nil
}

func (c *TaskUsage) usage() projections.Usage {
	return projections.Usage{Input: c.Input, Output: c.Output, CacheRead: c.CacheRead, CacheWrite: c.CacheWrite,
		Cost: c.Cost, Turns: c.Turns}
}

// runBudget is the run's budget use once this report replaces task t's
// previous totals (the projection keeps the run's sum incrementally, and
// Apply will do the same), its budgetTotal, and whether the run's budget is
// enforced at all (pi-crew: not when budgetTotal is unset or ≤ 0, nor when
// the run is budgetUnlimited).
func (c *TaskUsage) runBudget(run projections.Run, t projections.Task) (used, total int64, enforced bool) {
	used = projections.SaturatingAdd(run.BudgetUsed, c.usage().Budgeted()-t.Usage.Budgeted())
	total, _ = run.Budget()
	return used, total, total > 0 && !run.BudgetUnlimited
}

// windsDown: the report that reaches the abort threshold fails the run and
// cancels its work, as a run's transition to failed does, so a run at its
// quota is still aborted; a run is aborted once until it is reopened
// (abortStands), and reopening it is measured, so it cannot come round
// again. Every other report is measured (quota.go).
func (c *TaskUsage) windsDown(s *projections.State) bool {
	run, ok := s.Run(c.RunID)
	if !ok || abortStands(run) {
		return false
	}
	t, ok := s.Task(c.RunID, c.TaskID)
	if !ok {
		return false
	}
	used, total, enforced := c.runBudget(run, t)
	return enforced && reached(used, total, run.BudgetAbort, DefaultBudgetAbort)
}

// abortStands reports whether run's budget abort still holds: the run was aborted and has not been reopened since.
// An abort leaves its run ended (failed, or completed or cancelled as it was), so an aborted run that has not ended
// is one its orchestrator reopened (→ running from a terminal status). Such a run is held to the same budget: a
// report that reaches the abort threshold aborts it again, or its new tasks would spend without any bound.
func abortStands(run projections.Run) bool { return run.BudgetAborted && run.Status.Stale() }

// reached reports whether used ≥ fraction·total, fraction defaulting to def
// when the run left it unset. An explicit 0 is kept, as pi-crew's
// `budgetAbort ?? 0.95`: every report reaches it.
func reached(used, total int64, fraction *float64, def float64) bool {
	return float64(used) >= Threshold(fraction, def)*float64(total)
}

// Threshold is the fraction of its budget a run set for a threshold (budgetWarning, budgetAbort), or def when it set
// none: what reached compares with, and what audit names.
func Threshold(fraction *float64, def float64) float64 {
	if fraction != nil {
		return *fraction
	}
	return def
}

// FairShareFraction is the share of budgetTotal above which one task's usage
// is flagged (task.budget_fair_share), provided it is also above
// fairShareFloor of it (pi-crew's checkPerTaskBudget).
const (
	FairShareFraction = 0.5
	fairShareFloor    = 0.1
)

// overFairShare reports whether a task that used taskUsage is above its fair
// share of total. A report flags the task when it goes above, not on every
// report after (pi-crew re-flags on each scheduler pass; a log records the
// crossing once).
func overFairShare(taskUsage, total int64) bool {
	u := float64(taskUsage)
	return u > FairShareFraction*float64(total) && u > fairShareFloor*float64(total)
}

// budgetAbort is what an abort does to the run (D§4.4): workflow tasks that
// were dispatched and are not terminal are cancelled (a waiting one's
// question closes with it), those never dispatched are skipped, every
// in-flight delegation is asked to cancel (its shadow task follows its
// delegation, so shadows are not cancelled here), and the run fails when the
// D§2.2 machine lets it; the run's end closes the question a shadow task is
// parked on, which resumes (ask_end.go).
func budgetAbort(s *projections.State, env *Env, run projections.Run) []events.Event {
	var evs, shadowsResumed []events.Event
	fails := run.Status != projections.RunFailed && contains(runTransitions[run.Status], projections.RunFailed)
	// NB: the live tasks only (at most MaxLiveTasksPerRun), never every task the run has ended.
	s.EachLiveTask(run.RunID, func(t projections.Task) bool {
		if t.Shadow() {
			if fails {
				shadowsResumed = append(shadowsResumed,
					expireParked(s, env, run.RunID, t, events.AskReasonRunEnded)...)
			}
			return true
		}
		switch t.Status {
		case projections.TaskRunning, projections.TaskWaiting:
			evs = append(evs, closeQuestion(s, env, run.RunID, t, events.AskReasonAskerEnded)...)
			evs = append(evs, env.event(run.RunID, events.TypeTaskCancelled,
				&events.TaskCancelled{TaskID: t.TaskID, Reason: ReasonBudgetAbort}))
		case projections.TaskQueued:
			evs = append(evs, env.event(run.RunID, events.TypeTaskSkipped,
				&events.TaskSkipped{TaskID: t.TaskID, Reason: ReasonBudgetAbort}))
		}
		return true
	})
	evs = append(evs, cancelInFlight(s, env, run.RunID, ReasonBudgetAbort)...)
	if fails {
		evs = append(evs, env.event(run.RunID, events.TypeRunFailed, &events.RunFailed{Reason: ReasonBudgetAbort}))
		// The run's end closes the questions its shadow tasks are parked on, as run.transition does (ask_end.go).
		evs = append(evs, shadowsResumed...)
	}
	return evs
}
