package audit

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// A parent-not-running rejection is explained by what made the parent unable to delegate: its own status, its
// run's end (the parent itself still running), or, for a delegation, the cancel it was asked for.
func TestRejectionRuleParentNotRunning(t *testing.T) {
	for _, tc := range []struct {
		status, message, want string
	}{
		{"cancelled", "task is cancelled", "parent-not-running (parent is cancelled)"},
		{"running", "run is cancelled", "parent-not-running (the run has ended)"},
		{"running", events.ParentCancelRequestedMessage, "parent-not-running (the parent delegation was asked to cancel)"},
	} {
		p := &events.DelegateRejected{Reason: events.ReasonParentNotRunning, Message: tc.message,
			Policy: &events.Policy{ParentStatus: tc.status}}
		require.Equal(t, tc.want, RejectionRule(p), tc.message)
	}
}

// A refusal for a slot says when the request would have been refused with a slot free as well: such a refusal
// makes its run wait for nothing, which the fair-slot rule of the other runs' decisions depends on.
func TestRejectionRuleSlotRefusedOtherwise(t *testing.T) {
	for _, tc := range []struct {
		reason, otherwise, want string
	}{
		{events.ReasonSlotsExhausted, "", "slots-exhausted (4/4 in flight)"},
		{events.ReasonSlotsExhausted, events.ReasonTimeoutInvalid,
			"slots-exhausted (4/4 in flight; timeout-invalid with a slot free, so the run does not wait)"},
		{events.ReasonSlotShareExceeded, events.ReasonBudgetInsufficient,
			"slot-share-exceeded (the run holds 2 >= its share 2 while 1 other run(s) wait; 4/4 in flight; " +
				"budget-insufficient with a slot free, so the run does not wait)"},
	} {
		p := &events.DelegateRejected{Reason: tc.reason, Policy: &events.Policy{
			Held: 4, Capacity: 4, RunHeld: 2, SlotShare: 2, Waiting: 1, Otherwise: tc.otherwise}}
		require.Equal(t, tc.want, RejectionRule(p), tc.otherwise)
	}
}

// A refusal by a worker's share of its run's slots is explained by the worker's inputs, not the run's: the run
// may hold less than its share, or no other run wait, when one of its tasks waits.
func TestRejectionRuleWorkerSlotShare(t *testing.T) {
	p := &events.DelegateRejected{Reason: events.ReasonSlotShareExceeded, Policy: &events.Policy{
		Held: 3, Capacity: 4, SlotShare: 2, WorkerWaiting: 1, WorkerHeld: 3}}
	require.Equal(t, "slot-share-exceeded (the requesting worker holds 3 >= its share 2 with its delegations while 1 "+
		"other task(s) of the run wait; 3/4 in flight)", RejectionRule(p))
}

// An admission made while other runs waited for a slot passed the fair-slot rule: the run held less than its share.
// Its explanation says so with the inputs the decision recorded, as a refusal by that rule does.
func TestAdmissionRuleSlotShare(t *testing.T) {
	for _, tc := range []struct {
		waiting, runHeld, share int
		want                    string
	}{
		{0, 0, 0, "admitted: unmetered (the run has no budgetTotal and the parent no allocation; unmeteredDelegates=allow), " +
			"depth 2 <= 4, slots 1/2"},
		{1, 0, 1, "admitted: unmetered (the run has no budgetTotal and the parent no allocation; unmeteredDelegates=allow), " +
			"depth 2 <= 4, slots 1/2, the run holds 0 < its share 1 while 1 other run(s) wait"},
	} {
		p := &events.DelegateAdmitted{Unmetered: true, Policy: &events.Policy{ChildDepth: 2, MaxDepth: 4, Held: 1, Capacity: 2,
			UnmeteredDelegates: events.UnmeteredAllow, Waiting: tc.waiting, RunHeld: tc.runHeld, SlotShare: tc.share}}
		require.Equal(t, tc.want, admissionRule(projections.New(), "r1", p), "waiting %d", tc.waiting)
	}
}

// A depth refusal is explained by the values the gate compared: the depth the child would have (its parent's plus
// one) against maxDepth, not the parent's own depth, which is within it.
func TestRejectionRuleDepthExceeded(t *testing.T) {
	p := &events.DelegateRejected{Reason: events.ReasonDepthExceeded, Policy: &events.Policy{
		Depth: 3, ChildDepth: 4, MaxDepth: 3}}
	require.Equal(t, "depth-exceeded (child depth 4 > maxDepth 3)", RejectionRule(p))
}
