package bench

import (
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/crewlog/crewlog/events"
)

// event is one event an alternative writes: crewlog's type name and payload
// struct, so every implementation stores payloads of the same shape and size.
type event struct {
	Type    string
	Payload any
}

const (
	delegatePrompt = "explore the module and report the call graph of the admission path"
	delegateDesc   = "map the admission path"
	resultText     = "done: 14 call sites, 3 of them on the hot path"
)

func policyOf(st *runState, tokens int64) *events.Policy {
	return &events.Policy{
		NestingEnabled: true, Trusted: true, ParentStatus: "running", ParentRole: "executor", Role: "explorer",
		Depth: 1, ChildDepth: 2, MaxDepth: benchMaxDepth, Held: len(st.InFlight), Capacity: st.Slots,
		Metered: true, Granted: st.Granted, Spent: st.Spent, Requested: tokens,
		UnmeteredDelegates: events.UnmeteredAllow, CatalogSize: -1, TimeoutSec: 900,
	}
}

// newSubID mints a delegation id the way crewlog and pi-crew do.
func newSubID() string { return "gc-" + uuid.NewString() }

// newCommandID mints a command id the way pi-crew's client mints request
// ids (r-<uuid>).
func newCommandID() string { return "r-" + uuid.NewString() }

// decisionEvents are the events of one admission decision against st (before
// the decision is applied): requested + admitted + reserved, or requested +
// rejected.
func decisionEvents(st *runState, subID, reason string, tokens, nowMs int64) []event {
	pol := policyOf(st, tokens)
	evs := []event{{events.TypeDelegateRequested,
		&events.DelegateRequested{TaskID: parentTask, SubID: subID, Role: "explorer"}}}
	if reason != "" {
		msg := "delegate rejected: " + reason
		return append(evs, event{events.TypeDelegateRejected, &events.DelegateRejected{
			TaskID: parentTask, SubID: subID, Reason: reason, Message: msg, Policy: pol}})
	}
	return append(evs,
		event{events.TypeDelegateAdmitted, &events.DelegateAdmitted{
			TaskID: parentTask, SubID: subID, ChildDepth: 2, Role: "explorer", ReservedTokens: tokens,
			Model: "anthropic/m1", TimeoutSec: 900, Deadline: nowMs + 900_000, Cwd: "/w",
			Title: "delegate: " + delegateDesc, Description: delegateDesc, Prompt: delegatePrompt,
			ParentRole: "executor", Policy: pol}},
		event{events.TypeBudgetReserved, &events.BudgetReserved{
			TaskID: parentTask, SubID: subID, Tokens: tokens, GrantedTokens: st.Granted}})
}

// settleEvents are the events of a settlement: the fenced result delivered
// to the parent, then the terminal event.
func settleEvents(subID, outcome string) ([]event, error) {
	msgID := "msg_" + uuid.NewString()[:13]
	term := &events.DelegateSettled{TaskID: parentTask, SubID: subID, OK: outcome == "ok", MessageID: msgID}
	var t event
	switch outcome {
	case "ok":
		t = event{events.TypeDelegateCompleted, (*events.DelegateCompleted)(term)}
	case "failed":
		t = event{events.TypeDelegateFailed, (*events.DelegateFailed)(term)}
	case "timed_out":
		t = event{events.TypeDelegateTimedOut, (*events.DelegateTimedOut)(term)}
	case "cancelled":
		t = event{events.TypeDelegateCancelled, (*events.DelegateCancelled)(term)}
	default:
		return nil, fmt.Errorf("bench: unknown outcome %q", outcome)
	}
	body := fencedResult(subID, outcome)
	return []event{
		{events.TypeMailboxAppended, &events.MailboxAppended{
			ID: msgID, To: parentTask, From: events.ResultSenderPrefix + subID, Kind: events.KindResponse,
			Priority: events.PriorityNormal, DeliveryMode: events.DeliveryNextTurn, Body: body,
			Data: &events.MessageData{SubID: subID, OK: outcome == "ok", TimedOut: outcome == "timed_out",
				Cancelled: outcome == "cancelled"}}},
		t,
	}, nil
}

// fencedResult is the body of a delegation's result message (D§6.2).
func fencedResult(subID, outcome string) string {
	return "--- delegate " + subID + " (" + strings.ReplaceAll(outcome, "_", " ") + ") ---\n" + resultText +
		"\n--- end delegate " + subID + " ---"
}

// runCreated is the setup event every alternative writes first per run.
func runCreated(budget int64) event {
	return event{events.TypeRunCreated, &events.RunCreated{Team: "bench", Goal: "benchmark", Cwd: "/w",
		BudgetTotal: new(budget)}}
}
