package audit

import (
	"fmt"

	"github.com/crewlog/crewlog/events"
)

// describeDelegate tells the delegation lifecycle: request, the admission
// decision with the numbers the policy saw, spawn and settlement.
func describeDelegate(ev events.Event) string {
	switch ev.Type {
	case events.TypeDelegateRequested:
		if p := events.PayloadAs[events.DelegateRequested](ev); p != nil {
			return fmt.Sprintf("%s requests grandchild %s (role %s)", p.TaskID, p.SubID, p.Role)
		}
	case events.TypeDelegateAdmitted:
		if p := events.PayloadAs[events.DelegateAdmitted](ev); p != nil {
			return describeAdmitted(p)
		}
	case events.TypeDelegateRejected:
		if p := events.PayloadAs[events.DelegateRejected](ev); p != nil {
			return "rejected: " + RejectionRule(p)
		}
	case events.TypeDelegateSpawned:
		if p := events.PayloadAs[events.DelegateSpawned](ev); p != nil {
			return fmt.Sprintf("delegate %s running (pid %d)", p.SubID, p.PID)
		}
	case events.TypeDelegateCancelRequested:
		if p := events.PayloadAs[events.DelegateCancelRequested](ev); p != nil {
			return withReason(fmt.Sprintf("delegate %s asked to cancel", p.SubID), p.Reason)
		}
	case events.TypeDelegateCompleted:
		return describeSettled(ev, (*events.DelegateSettled)(events.PayloadAs[events.DelegateCompleted](ev)), "completed")
	case events.TypeDelegateFailed:
		return describeSettled(ev, (*events.DelegateSettled)(events.PayloadAs[events.DelegateFailed](ev)), "failed")
	case events.TypeDelegateTimedOut:
		return describeSettled(ev, (*events.DelegateSettled)(events.PayloadAs[events.DelegateTimedOut](ev)), "timed out")
	case events.TypeDelegateCancelled:
		return describeSettled(ev, (*events.DelegateSettled)(events.PayloadAs[events.DelegateCancelled](ev)), "cancelled")
	}
	return ev.Type
}

func describeAdmitted(p *events.DelegateAdmitted) string {
	s := fmt.Sprintf("delegate %s admitted at depth %d", p.SubID, p.ChildDepth)
	switch {
	case p.Unmetered:
		s += ", unmetered"
	case p.Policy != nil:
		s += fmt.Sprintf(", reserved %d of %d", p.ReservedTokens, p.Policy.Granted)
	default:
		s += fmt.Sprintf(", reserved %d", p.ReservedTokens)
	}
	if p.Model != "" {
		s += ", model " + p.Model
	}
	return s + fmt.Sprintf(", timeout %gs", p.TimeoutSec)
}

func describeSettled(ev events.Event, p *events.DelegateSettled, outcome string) string {
	if p == nil {
		return ev.Type
	}
	s := fmt.Sprintf("delegate %s %s", p.SubID, outcome)
	if p.Expired {
		s += " by the engine clock (deadline + grace passed)"
	}
	if p.UsageTokens > 0 {
		s += fmt.Sprintf(", used %d tokens", p.UsageTokens)
	}
	s += ", slot freed"
	return withReason(s, p.Error)
}

// RejectionRule names the rule behind a recorded rejection with the inputs
// the policy saw: "slots-exhausted (2/2 in flight)". A rejection recorded
// without its policy inputs is explained by its message.
func RejectionRule(p *events.DelegateRejected) string {
	pol := p.Policy
	if pol == nil {
		return withReason(p.Reason, p.Message)
	}
	var why string
	switch p.Reason {
	case events.ReasonNestingDisabled:
		why = "nesting.enabled=false"
	case events.ReasonNoTask:
		why = fmt.Sprintf("parent %s not found", p.TaskID)
	case events.ReasonParentNotRunning:
		why = fmt.Sprintf("parent is %s", orDash(pol.ParentStatus))
		if pol.ParentStatus == "running" {
			why = "the run has ended"
			if p.Message == events.ParentCancelRequestedMessage {
				why = "the parent delegation was asked to cancel"
			}
		}
	case events.ReasonRoleDenied:
		why = fmt.Sprintf("role %s is not explorer/analyst/executor", pol.Role)
	case events.ReasonTrustDenied:
		why = "untrusted escalation context"
	case events.ReasonDepthExceeded:
		why = fmt.Sprintf("child depth %d > maxDepth %d", pol.ChildDepth, pol.MaxDepth)
	case events.ReasonSlotsExhausted:
		why = fmt.Sprintf("%d/%d in flight", pol.Held, pol.Capacity)
	case events.ReasonSlotShareExceeded:
		why = fmt.Sprintf("the run holds %d >= its share %d while %d other run(s) wait; %d/%d in flight",
			pol.RunHeld, pol.SlotShare, pol.Waiting, pol.Held, pol.Capacity)
		if pol.WorkerWaiting > 0 { // NB: the worker's check follows the run's, so it recorded only when that passed
			why = fmt.Sprintf("the requesting worker holds %d >= its share %d with its delegations while %d other "+
				"task(s) of the run wait; %d/%d in flight", pol.WorkerHeld, pol.SlotShare, pol.WorkerWaiting,
				pol.Held, pol.Capacity)
		}
	case events.ReasonBudgetInsufficient:
		why = fmt.Sprintf("budget mode %s: requested %d > remaining %s", budgetMode(pol.BudgetMode), pol.Requested,
			remainingInputs(pol))
	case events.ReasonUnmeteredDenied:
		why = "nothing to meter and unmeteredDelegates=deny"
	case events.ReasonModelInvalid:
		why = fmt.Sprintf("model %s is not in the catalog of %d", pol.Model, max(pol.CatalogSize, 0))
	case events.ReasonTimeoutInvalid:
		why = fmt.Sprintf("timeoutSec %g is outside 1..86400", pol.TimeoutSec)
	case events.ReasonWorkspaceConflict:
		why = fmt.Sprintf("%d in-flight executor(s) share the cwd, serializeOnPathOverlap off", pol.Overlapping)
	default:
		return withReason(p.Reason, p.Message)
	}
	if pol.Otherwise != "" {
		why += fmt.Sprintf("; %s with a slot free, so the run does not wait", pol.Otherwise)
	}
	return fmt.Sprintf("%s (%s)", p.Reason, why)
}
