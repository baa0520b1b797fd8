package httpapi

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// TestTaskIDBoundCountsChars: a task id is bounded in chars (events.MaxIDChars, as the socket's queries count it),
// and a pi-crew task imported before an import bounded an id's bytes too (events.ImportedIDOK) may be named by one of
// non-ASCII chars, several bytes each, or of chars JSON writes in six. The taskId a run's mailbox and ledger reads
// take is held to the chars alone, so that every task the run lists can be read: a log that holds tasks of 129 'é'
// (258 bytes), of MaxIDChars 'é' and of MaxIDChars '<' replays, and each is answered; one of 128 'é', which an import
// records now, too; one char past the bound is refused.
func TestTaskIDBoundCountsChars(t *testing.T) {
	const run = "imported-wide"
	recorded := []string{strings.Repeat("é", 129), strings.Repeat("é", commands.MaxIDChars),
		strings.Repeat("<", commands.MaxIDChars)}
	imported := strings.Repeat("é", commands.MaxIDChars/2)
	evs := []any{&events.RunCreated{Team: "t", Goal: "g", Cwd: "/srv"}}
	for i, task := range append(recorded, imported) {
		evs = append(evs, &events.TaskCreated{TaskID: task, Role: "executor", Agent: "a", Title: "wide", Cwd: "/srv",
			StepID: "s", Kind: events.TaskKindWorkflow},
			&events.MailboxAppended{ID: "m" + string(rune('0'+i)), To: task, From: "orchestrator",
				Kind: events.KindMessage, Priority: events.PriorityNormal, DeliveryMode: events.DeliveryNextTurn,
				Body: `"hi"`},
			&events.BudgetReserved{TaskID: task, SubID: "gc-" + string(rune('0'+i)), Tokens: 5, GrantedTokens: 100})
	}
	// The tasks of ids an import no longer takes, as an older crewd's import recorded them.
	old := len(evs) - 3
	f := newFixtureStore(t, Options{}, commands.Options{SnapshotEvery: -1, ExpiryInterval: -1}, nil,
		func(dir string, _ uint64) {
			l, err := eventlog.Open(dir, nil)
			require.NoError(t, err)
			var w eventlog.Write
			for i, p := range evs[:old] {
				payload, err := events.EncodePayload(p)
				require.NoError(t, err)
				typ, ok := events.TypeOf(p)
				require.True(t, ok)
				w.Events = append(w.Events, eventlog.Event{Stream: run, StreamVersion: uint64(i + 1), Type: typ,
					SchemaVersion: events.SchemaVersion(typ), Time: 1e12, ActorRole: events.RoleAdmin,
					CorrelationID: events.ImportCorrelation + events.ForeignSourcePicrew, Payload: payload})
			}
			_, err = l.Append(w)
			require.NoError(t, err)
			require.NoError(t, l.Close())
		})
	var now []commands.ImportedEvent
	for _, p := range evs[old:] {
		typ, _ := events.TypeOf(p)
		now = append(now, commands.ImportedEvent{Type: typ, TimeMs: 1001, Payload: p})
	}
	r := f.do(events.Actor{Role: events.RoleAdmin}, &commands.Import{Source: events.ForeignSourcePicrew, RunID: run,
		Events: now})
	require.Nil(t, r.Rejected, "%v", r.Rejected)

	listed := map[string]bool{}
	for _, task := range f.ok("/api/v1/runs/" + run + "/tasks")["tasks"].([]any) {
		listed[task.(map[string]any)["id"].(string)] = true
	}
	for _, task := range append(recorded, imported) {
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
