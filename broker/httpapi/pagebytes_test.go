package httpapi

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// TestPagesAreBoundedInBytes: a page of the largest messages and goals the engine takes (MaxBodyChars each) stops
// before maxPageBytes, however large the limit, and paging on still visits every item once — events in both
// orders, the mailbox, and runs (listed and searched, oldest or newest first).
func TestPagesAreBoundedInBytes(t *testing.T) {
	f := newFixture(t, Options{})
	const n = 24 // 24 × 256 KiB: more than one page's bytes
	body := strings.Repeat("x", commands.MaxBodyChars)
	for i := 0; i < n; i++ {
		r := f.do(audittest.Orchestrator, &commands.MessageSend{RunID: liveRun, To: []string{"01_lead"}, Body: body})
		require.Nil(t, r.Rejected, "%v", r.Rejected)
		r = f.do(audittest.Admin, &commands.RunCreate{RunID: fmt.Sprintf("big_%02d", i), Team: "big", Goal: body})
		require.Nil(t, r.Rejected, "%v", r.Rejected)
	}
	var runs int
	f.eng.Read(func(st *projections.State) {
		page, err := st.Runs(projections.RunFilter{})
		require.NoError(t, err)
		runs = len(page.Runs)
	})
	for _, tc := range []struct {
		path, key string
		n         int
	}{
		{"/api/v1/runs/" + liveRun + "/events?type=" + events.TypeMailboxAppended + "&limit=1000", "events", n},
		{"/api/v1/runs/" + liveRun + "/events?type=" + events.TypeMailboxAppended + "&limit=1000&order=desc", "events", n},
		{"/api/v1/runs/" + liveRun + "/mailbox?taskId=01_lead&limit=1000", "messages", n},
		{"/api/v1/runs?limit=1000", "runs", runs},
		{"/api/v1/runs?limit=1000&newest=true", "runs", runs},
		{"/api/v1/runs?limit=1000&q=big_", "runs", n},
	} {
		seen, pages, cursor := map[string]bool{}, 0, ""
		for {
			path := tc.path
			if cursor != "" {
				path += "&cursor=" + cursor
			}
			size, m := f.rawGet(path)
			require.LessOrEqual(t, size, maxPageBytes+4096, "%s: the page's bytes", path)
			items := m[tc.key].([]any)
			for _, it := range items {
				b, err := json.Marshal(it)
				require.NoError(t, err)
				require.False(t, seen[string(b)], "%s: an item repeated", path)
				seen[string(b)] = true
			}
			pages++
			if !m["hasMore"].(bool) {
				break
			}
			require.NotEmpty(t, items, path)
			cursor = m["nextCursor"].(string)
		}
		require.Len(t, seen, tc.n, tc.path)
		require.Greater(t, pages, 1, tc.path)
	}
}

// rawGet is get with the answer's size in bytes.
func (f *fixture) rawGet(path string) (int, map[string]any) {
	f.t.Helper()
	b := f.body(path)
	var m map[string]any
	require.NoError(f.t, json.Unmarshal(b, &m))
	return len(b), m
}

// TestStateListsAreBoundedInBytes: a worker may ask any number of questions of MaxQuestionChars each; a state?at
// answer keeps each list within maxPageBytes of JSON and says it is truncated.
func TestStateListsAreBoundedInBytes(t *testing.T) {
	f := newFixture(t, Options{})
	// 400 questions of 24 KiB each (3 bytes a character): over twice maxPageBytes.
	question := strings.Repeat("€", commands.MaxQuestionChars)
	const n = 400
	// pending is the task's question: one at a time, resolved before the next.
	var pending string
	f.eng.Read(func(st *projections.State) {
		for _, a := range st.Asks(liveRun) {
			if a.TaskID == "01_lead" && a.Status == projections.AskPending {
				pending = a.QuestionID
			}
		}
	})
	worker := audittest.Worker("01_lead")
	for i := 0; i < n; i++ {
		r := f.do(worker, &commands.WaitResolve{RunID: liveRun, TaskID: "01_lead", QuestionID: pending})
		require.Nil(t, r.Rejected, "%v", r.Rejected)
		r = f.do(worker, &commands.WaitRequest{RunID: liveRun, TaskID: "01_lead", Question: question})
		require.Nil(t, r.Rejected, "%v", r.Rejected)
		var res commands.WaitResult
		require.NoError(t, json.Unmarshal(r.Result, &res))
		pending = res.QuestionID
	}
	for _, at := range []uint64{head(f), head(f) - 1} { // the published state, and a rebuild
		size, m := f.rawGet(fmt.Sprintf("/api/v1/runs/%s/state?at=%d", liveRun, at))
		require.LessOrEqual(t, size, 2*maxPageBytes, "at %d", at)
		require.True(t, m["truncated"].(bool), "at %d", at)
		require.NotEmpty(t, m["asks"], "at %d", at)
		require.NotEmpty(t, m["tasks"], "at %d", at)
	}
}
