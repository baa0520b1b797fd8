package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/broker"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/events/jsonstring/jsonref"
	"github.com/crewlog/crewlog/projections"
)

// escaped holds what encoding/json escapes: HTML's <, > and &, U+2028 and U+2029, and bytes that are not UTF-8.
const escaped = "<script>a && b</script> \u2028 \u2029 \xff\xfe end"

// oldEventsResult, oldRunsResult and oldStateResult are the answers' shapes as they were when json.Marshal wrote
// the whole answer: typed items (events as json.RawMessage), encoded with the answer.
type oldEventsResult struct {
	Events     []json.RawMessage `json:"events"`
	HasMore    bool              `json:"hasMore"`
	NextCursor string            `json:"nextCursor,omitempty"`
}

type oldRunsResult struct {
	Runs       []runItem `json:"runs"`
	HasMore    bool      `json:"hasMore"`
	NextCursor string    `json:"nextCursor,omitempty"`
}

type oldStateResult struct {
	Position    uint64            `json:"position"`
	Head        uint64            `json:"head"`
	At          *string           `json:"at,omitempty"`
	Run         runItem           `json:"run"`
	Tasks       []taskItem        `json:"tasks"`
	Delegations []delegationItem  `json:"delegations"`
	Ledger      []accountItem     `json:"ledger"`
	Asks        []projections.Ask `json:"asks"`
	Slots       stateSlots        `json:"slots"`
	Truncated   bool              `json:"truncated"`
}

// oldList is runList's answer as it was: the typed items in a map, encoded with it.
func oldList(key string, items any, next string, total int) any {
	res := map[string]any{key: items, "hasMore": next != "", "total": total}
	if next != "" {
		res["nextCursor"] = next
	}
	return res
}

// TestListsAnswerAsBefore: every list written from its items' encodings measured for the page is byte for byte the
// answer json.Marshal gave for the typed items, escaping included: events in both orders, the mailbox, asks,
// tasks, runs and a state.
func TestListsAnswerAsBefore(t *testing.T) {
	f := newFixture(t, Options{})
	for _, body := range []string{escaped, "plain", escaped + escaped} {
		r := f.do(audittest.Orchestrator, &commands.MessageSend{RunID: liveRun, To: []string{"01_lead"}, Body: body})
		if r.Rejected != nil { // the engine refuses bytes that are not UTF-8 in a body
			r = f.do(audittest.Orchestrator, &commands.MessageSend{RunID: liveRun, To: []string{"01_lead"},
				Body: body[:len(body)-len("\xff\xfe end")]})
		}
		require.Nil(t, r.Rejected, "%v", r.Rejected)
	}
	r := f.do(audittest.Admin, &commands.RunCreate{RunID: "escaped_run", Team: "t<&>", Goal: escaped, Cwd: "/w"})
	require.Nil(t, r.Rejected, "%v", r.Rejected)
	const task = "04_escaped"
	for _, c := range []struct {
		actor events.Actor
		cmd   commands.Command
	}{
		{audittest.Orchestrator, &commands.TaskCreate{RunID: liveRun, TaskID: task, Role: "executor", Agent: "executor",
			Title: escaped, Cwd: "/srv/live/" + task, StepID: task}},
		{audittest.Orchestrator, &commands.TaskTransition{RunID: liveRun, TaskID: task, To: "running"}},
		{audittest.Worker(task), &commands.WaitRequest{RunID: liveRun, TaskID: task, Question: escaped}},
	} {
		r := f.do(c.actor, c.cmd)
		require.Nil(t, r.Rejected, "%T: %v", c.cmd, r.Rejected)
	}

	var (
		head      uint64
		recs      []json.RawMessage
		positions []uint64
		expect    = map[string]any{}
	)
	it := f.log.ReadStream(liveRun, 1)
	for it.Next() {
		b, err := eventJSON(it.Event())
		require.NoError(t, err)
		recs, positions = append(recs, b), append(positions, it.Event().Position)
	}
	require.NoError(t, it.Close())
	n := len(recs)
	expect["/events?limit=1000"] = oldEventsResult{Events: recs}
	expect["/events?limit=1000&order=desc"] = oldEventsResult{Events: reversed(recs)}
	expect["/events?limit=2"] = oldEventsResult{Events: recs[:2], HasMore: true, NextCursor: fmt.Sprint(positions[1])}
	expect["/events?limit=2&order=desc"] = oldEventsResult{Events: reversed(recs[n-2:]), HasMore: true,
		NextCursor: fmt.Sprint(positions[n-2])}
	f.eng.Read(func(st *projections.State) {
		head = st.Position
		for _, limit := range []int{1000, 1} {
			mp, err := st.Mailbox(liveRun, "01_lead", projections.MailboxFilter{Limit: limit})
			require.NoError(t, err)
			msgs := make([]any, len(mp.Messages))
			for i, m := range mp.Messages {
				msgs[i] = broker.WireMessage(m)
			}
			expect[fmt.Sprint("/mailbox?taskId=01_lead&limit=", limit)] = oldList("messages", msgs, mp.NextCursor, mp.Total)
		}
		ap, err := st.AsksPage(liveRun, false, projections.PageFilter{Limit: 1000})
		require.NoError(t, err)
		expect["/asks?limit=1000"] = oldList("asks", nonNil(ap.Items), ap.NextCursor, ap.Total)
		tp, err := st.TasksPage(liveRun, projections.PageFilter{Limit: 1000})
		require.NoError(t, err)
		tasks := make([]taskItem, len(tp.Items))
		for i, task := range tp.Items {
			tasks[i] = taskOf(task)
		}
		expect["/tasks?limit=1000"] = oldList("tasks", tasks, tp.NextCursor, tp.Total)
		for _, limit := range []int{1000, 2} {
			rp, err := st.Runs(projections.RunFilter{Limit: limit})
			require.NoError(t, err)
			runs := oldRunsResult{Runs: []runItem{}, NextCursor: rp.NextCursor, HasMore: rp.NextCursor != ""}
			for _, run := range rp.Runs {
				runs.Runs = append(runs.Runs, itemOf(st, run))
			}
			expect[fmt.Sprint("/api/v1/runs?limit=", limit)] = runs
		}
		for _, runID := range []string{liveRun, "escaped_run"} {
			out, ok, err := runView(st, runID)
			require.NoError(t, err)
			require.True(t, ok)
			held := st.SlotsHeld()
			out.Slots.Held = &held
			l := out.lists
			old := oldStateResult{Position: out.Position, Head: head, Run: out.Run, Tasks: l.tasks,
				Delegations: l.delegations, Ledger: l.ledger, Asks: l.asks, Slots: out.Slots, Truncated: out.Truncated}
			expect["/api/v1/runs/"+runID+"/state?at=999999"] = old
			at := "2100-01-01T00:00:00Z"
			old.At = &at
			expect["/api/v1/runs/"+runID+"/state?at="+at] = old
		}
	})
	require.Equal(t, 14, len(expect), "the answers compared")
	page := f.body("/api/v1/runs/" + liveRun + "/state?at=999999")
	require.Contains(t, string(jsonref.Comparable(page)), string(jsonref.Comparable([]byte(`\ufffd\ufffd end`))),
		"bytes that are not UTF-8 are on the page, replaced as encoding/json replaces them (from Go 1.27 by U+FFFD)")
	for path, old := range expect {
		if path[0] != '/' || path[:4] != "/api" {
			path = "/api/v1/runs/" + liveRun + path
		}
		want, err := json.Marshal(old)
		require.NoError(t, err)
		got := f.body(path)
		require.Equal(t, string(append(want, '\n')), string(got), "GET %s", path)
		if !strings.Contains(path, "limit=") || strings.Contains(path, "limit=1000") {
			require.Contains(t, string(got), `\u003cscript\u003ea \u0026\u0026 b\u003c/script\u003e \u2028 \u2029`,
				"GET %s: the escaped items are on the page", path)
		}
	}
}

// TestEncodedItemsAsTheAnswerEncodesThem: an item encoded alone is the bytes json.Marshal writes for it inside its
// page, for every list's item type, with characters encoding/json escapes (bytes that are not UTF-8 included).
func TestEncodedItemsAsTheAnswerEncodesThem(t *testing.T) {
	for name, items := range map[string]any{
		"tasks":       []taskItem{{Task: projections.Task{TaskID: escaped, Title: escaped}, Kind: escaped}},
		"delegations": []delegationItem{{Delegation: projections.Delegation{SubID: escaped}}},
		"ledger":      []accountItem{{RunID: escaped, TaskID: escaped}},
		"asks":        []projections.Ask{{Question: escaped}},
		"messages":    []any{broker.WireMessage(projections.Message{Body: escaped, From: escaped})},
		"runs":        []runItem{{Run: projections.Run{RunID: escaped, Goal: escaped}}},
		"jobs":        []jobItem{{JobSummary: broker.JobSummary{JobID: escaped}}},
		"credentials": []credentialItem{{Key: escaped, IssuedBy: escaped}},
		"none":        []runItem(nil),
		"empty":       []runItem{},
	} {
		raw, _, full, err := encodeFitting(items, 0)
		require.NoError(t, err, name)
		require.False(t, full, name)
		want, err := json.Marshal(oldList(name, items, "next", 1))
		require.NoError(t, err, name)
		got, err := json.Marshal(oldList(name, raw, "next", 1))
		require.NoError(t, err, name)
		require.Equal(t, string(want), string(got), name)
	}
}

// body is the answer to GET path as the admin, byte for byte.
func (f *fixture) body(path string) []byte {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodGet, f.web.URL+path, nil)
	require.NoError(f.t, err)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := f.web.Client().Do(req)
	require.NoError(f.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(f.t, err)
	require.Equal(f.t, http.StatusOK, resp.StatusCode, "GET %s: %s", path, b[:min(len(b), 300)])
	return b
}

func reversed(s []json.RawMessage) []json.RawMessage {
	r := slices.Clone(s)
	slices.Reverse(r)
	return r
}
