package audit

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// TestDescribeQuotaRefusal: the timeline tells a quota refusal by the command it refused, its caller and the
// numbers the check saw, not by its event type alone.
func TestDescribeQuotaRefusal(t *testing.T) {
	for _, tc := range []struct {
		p    events.RunQuotaExceeded
		want string
	}{
		{events.RunQuotaExceeded{Method: "msg.send", TaskID: "t1", Quota: events.QuotaMsgRate, Used: 2, Adding: 1, Max: 2},
			"msg.send of t1 refused: quota msg-rate: used 2 + adding 1 > max 2"},
		{events.RunQuotaExceeded{Method: "task.create", TaskID: events.OrchestratorKey, Quota: events.QuotaEvents, Used: 10, Adding: 2, Max: 11},
			"task.create of " + events.OrchestratorKey + " refused: quota events: used 10 + adding 2 > max 11"},
		{events.RunQuotaExceeded{Method: "steer.push", Quota: events.QuotaBytes, Used: 900, Adding: 200, Max: 1000},
			"steer.push of - refused: quota bytes: used 900 + adding 200 > max 1000"},
	} {
		ev := events.Event{Type: events.TypeRunQuotaExceeded, Stream: "r1", Payload: &tc.p}
		require.Equal(t, tc.want, Describe(ev), tc.p.Quota)
	}
}

// TestDescribeCappedCharge: a charge that stopped at the parent's grant (nested budget mode) tells the excess it
// could not cover, which the usage and the reservation it shows would otherwise put on the ledger.
func TestDescribeCappedCharge(t *testing.T) {
	for _, tc := range []struct {
		p    events.BudgetCharged
		want string
	}{
		{events.BudgetCharged{TaskID: "t1", SubID: "gc-1", Tokens: 4000, UsageTokens: 5000, ReservedTokens: 1000},
			"budget charged 4000 over the reservation to t1 (used 5000, reserved 1000)"},
		{events.BudgetCharged{TaskID: "t1", SubID: "gc-1", Tokens: 100, UsageTokens: 5000, ReservedTokens: 1000, Uncharged: 3900},
			"budget charged 100 over the reservation to t1 (used 5000, reserved 1000), 3900 uncharged: a charge stops at what the parent may still spend"},
	} {
		ev := events.Event{Type: events.TypeBudgetCharged, Stream: "r1", Payload: &tc.p}
		require.Equal(t, tc.want, Describe(ev), "uncharged %d", tc.p.Uncharged)
	}
}

// TestDescribeQuestionClosedEarly: a question closed because its task or its run ended, before its deadline, is not
// told as timed out.
func TestDescribeQuestionClosedEarly(t *testing.T) {
	for _, tc := range []struct {
		reason string
		want   string
	}{
		{"", "question q1 of t1 timed out"},
		{events.AskReasonAskerEnded, "question q1 of t1 closed before its deadline: asker-ended"},
		{events.AskReasonRunEnded, "question q1 of t1 closed before its deadline: run-ended"},
	} {
		p := events.AskTimedOut{TaskID: "t1", QuestionID: "q1", Reason: tc.reason}
		ev := events.Event{Type: events.TypeAskTimedOut, Stream: "r1", Payload: &p}
		require.Equal(t, tc.want, Describe(ev), tc.reason)
	}
}
