package httpapi

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
)

// TestTaskIDBoundCountsChars: a task id is bounded in chars (events.MaxIDChars, as the socket's queries count it),
// and an imported pi-crew task may be named by one of non-ASCII chars, several bytes each. The taskId a run's
// mailbox and ledger reads take is held to the same bound, so that every task the run lists can be read: a task of
// 129 'é' (258 bytes) and one of MaxIDChars 'é' are answered, and one char past the bound is refused.
func TestTaskIDBoundCountsChars(t *testing.T) {
	f := newFixture(t, Options{})
	const run = "imported-wide"
	evs := []commands.ImportedEvent{{Type: events.TypeRunCreated, TimeMs: 1000,
		Payload: &events.RunCreated{Team: "t", Goal: "g", Cwd: "/srv"}}}
	wide := []string{strings.Repeat("é", 129), strings.Repeat("é", commands.MaxIDChars)}
	for i, task := range wide {
		evs = append(evs,
			commands.ImportedEvent{Type: events.TypeTaskCreated, TimeMs: 1001, Payload: &events.TaskCreated{TaskID: task,
				Role: "executor", Agent: "a", Title: "wide", Cwd: "/srv", StepID: "s", Kind: events.TaskKindWorkflow}},
			commands.ImportedEvent{Type: events.TypeMailboxAppended, TimeMs: 1002, Payload: &events.MailboxAppended{
				ID: "m" + string(rune('0'+i)), To: task, From: "orchestrator", Kind: events.KindMessage,
				Priority: events.PriorityNormal, DeliveryMode: events.DeliveryNextTurn, Body: `"hi"`}},
			commands.ImportedEvent{Type: events.TypeBudgetReserved, TimeMs: 1003, Payload: &events.BudgetReserved{
				TaskID: task, SubID: "gc-" + string(rune('0'+i)), Tokens: 5, GrantedTokens: 100}})
	}
	r := f.do(events.Actor{Role: events.RoleAdmin}, &commands.Import{Source: events.ForeignSourcePicrew, RunID: run,
		Events: evs})
	require.Nil(t, r.Rejected, "%v", r.Rejected)

	listed := map[string]bool{}
	for _, task := range f.ok("/api/v1/runs/" + run + "/tasks")["tasks"].([]any) {
		listed[task.(map[string]any)["id"].(string)] = true
	}
	for _, task := range wide {
		require.True(t, listed[task], "the run lists its task of %d chars", len([]rune(task)))
		q := "?taskId=" + url.QueryEscape(task)
		msgs := f.ok("/api/v1/runs/" + run + "/mailbox" + q)["messages"].([]any)
		require.Len(t, msgs, 1)
		require.Equal(t, task, msgs[0].(map[string]any)["to"])
		require.Equal(t, task, f.ok("/api/v1/runs/" + run + "/ledger" + q)["taskId"])
	}
	past := "?taskId=" + url.QueryEscape(strings.Repeat("é", commands.MaxIDChars+1))
	for _, path := range []string{"/mailbox", "/ledger"} {
		require.Contains(t, f.fails("/api/v1/runs/"+run+path+past, http.StatusBadRequest, "bad-params"), "taskId")
	}
}
