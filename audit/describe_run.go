package audit

import (
	"fmt"
	"strings"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
)

// describeRun tells a run's lifecycle, budget thresholds and quota refusals.
func describeRun(ev events.Event) string {
	switch p := ev.Payload.(type) {
	case *events.RunCreated:
		s := fmt.Sprintf("run created for team %s: %q", p.Team, p.Goal)
		switch {
		case p.BudgetUnlimited:
			s += ", budget unlimited"
		case p.BudgetTotal != nil:
			s += fmt.Sprintf(", budget %d tokens", *p.BudgetTotal)
		}
		return s
	case *events.RunBudgetWarning:
		return fmt.Sprintf("run budget warning: %d of %d used", p.BudgetUsed, p.BudgetTotal)
	case *events.RunBudgetAbort:
		return fmt.Sprintf("run budget abort: %d of %d used", p.BudgetUsed, p.BudgetTotal)
	case *events.RunQuotaExceeded:
		return fmt.Sprintf("%s of %s refused: %s", p.Method, orDash(p.TaskID), commands.QuotaRule(*p))
	}
	if status, ok := strings.CutPrefix(ev.Type, "run."); ok {
		var c *events.RunStatusChanged
		switch p := ev.Payload.(type) {
		case *events.RunQueued:
			c = (*events.RunStatusChanged)(p)
		case *events.RunPlanning:
			c = (*events.RunStatusChanged)(p)
		case *events.RunRunning:
			c = (*events.RunStatusChanged)(p)
		case *events.RunBlocked:
			c = (*events.RunStatusChanged)(p)
		case *events.RunCompleted:
			c = (*events.RunStatusChanged)(p)
		case *events.RunFailed:
			c = (*events.RunStatusChanged)(p)
		case *events.RunCancelled:
			c = (*events.RunStatusChanged)(p)
		}
		s := "run " + status
		if c != nil {
			s = withReason(s, c.Reason)
			if c.Summary != "" {
				s += fmt.Sprintf(" (%s)", c.Summary)
			}
		}
		return s
	}
	return ev.Type
}

// describeTask tells a task's lifecycle and usage.
func describeTask(ev events.Event) string {
	switch p := ev.Payload.(type) {
	case *events.TaskCreated:
		s := fmt.Sprintf("task %s created (%s, %s)", p.TaskID, p.Role, p.Title)
		if p.Depth > 1 {
			s += fmt.Sprintf(" at depth %d", p.Depth)
		}
		return s
	case *events.TaskStarted:
		return fmt.Sprintf("task %s running", p.TaskID)
	case *events.TaskCompleted:
		return fmt.Sprintf("task %s completed", p.TaskID)
	case *events.TaskFailed:
		return withReason(fmt.Sprintf("task %s failed", p.TaskID), p.Error)
	case *events.TaskNeedsAttention:
		return withReason(fmt.Sprintf("task %s needs attention", p.TaskID), p.Error)
	case *events.TaskCancelled:
		return withReason(fmt.Sprintf("task %s cancelled", p.TaskID), p.Reason)
	case *events.TaskSkipped:
		return withReason(fmt.Sprintf("task %s skipped", p.TaskID), p.Reason)
	case *events.TaskRetried:
		return withReason(fmt.Sprintf("task %s retried", p.TaskID), p.Reason)
	case *events.TaskWaiting:
		return fmt.Sprintf("task %s waits on question %s", p.TaskID, p.QuestionID)
	case *events.TaskResumed:
		return fmt.Sprintf("task %s resumed after %s", p.TaskID, p.QuestionID)
	case *events.TaskUsage:
		return fmt.Sprintf("task %s usage: %d in, %d out, %d cache write (%d counted)",
			p.TaskID, p.Input, p.Output, p.CacheWrite, p.Input+p.Output+p.CacheWrite)
	case *events.TaskBudgetFairShare:
		return fmt.Sprintf("task %s above its fair share: %d of a run budget of %d", p.TaskID, p.TaskUsage, p.BudgetTotal)
	}
	return ev.Type
}
