package audit

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
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
