package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
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

// TestEventsNewestFirstReadsAboutItsPage: a page of events newest first reads whole only the events it holds
// (and the one that did not fit), not every event of the chunk it looked at: a worker's 300 messages of 200 KiB
// are 60 MiB, and a page of one of them, or of as many as fit in maxPageBytes, allocates about what the same page
// read oldest first does (which reads forward and stops at the page's end) — the records, their JSON and the answer.
func TestEventsNewestFirstReadsAboutItsPage(t *testing.T) {
	f := newFixture(t, Options{})
	start := head(f)
	const n, size = 300, 200 << 10
	body := strings.Repeat("x", size)
	for i := 0; i < n; i++ {
		r := f.do(audittest.Worker("02_help"), &commands.MessageSend{RunID: liveRun, FromTask: "02_help",
			To: []string{"parent"}, Body: body})
		require.Nil(t, r.Rejected, "%v", r.Rejected)
	}
	for _, q := range []string{"limit=1", "limit=1000", "limit=1000&type=" + events.TypeMailboxAppended} {
		path := "/api/v1/runs/" + liveRun + "/events?" + q
		asc, ascPage := allocated(t, f, fmt.Sprintf("%s&cursor=%d", path, start))
		desc, descPage := allocated(t, f, path+"&order=desc")
		t.Logf("%s: %d events, %d KiB; allocated %d KiB oldest first, %d KiB newest first", q, descPage.n,
			descPage.bytes>>10, asc>>10, desc>>10)
		require.Equal(t, ascPage.n, descPage.n, "%s: pages of as many messages", q)
		if !raceDetector {
			require.Less(t, desc, 2*asc, "%s: newest first allocated %d MiB, oldest first %d MiB", q, desc>>20, asc>>20)
		}
	}
}

type answered struct{ n, bytes int }

// allocated is the bytes the server allocated answering path (and the answer); it must be 200 with hasMore. NB: the
// process's allocations are counted, Pebble's background flushes and compactions of the fixture's 60 MB of messages
// among them, which a loaded machine may run during an answer: the least of three is the answer's own.
func allocated(t *testing.T, f *fixture, path string) (least uint64, page answered) {
	t.Helper()
	for i := range 3 {
		n, p := allocatedOnce(t, f, path)
		if i == 0 || n < least {
			least, page = n, p
		}
	}
	return least, page
}

func allocatedOnce(t *testing.T, f *fixture, path string) (uint64, answered) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.Host = "127.0.0.1"
	req.Header.Set("Authorization", "Bearer "+adminToken)
	rec := httptest.NewRecorder()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f.srv.Handler().ServeHTTP(rec, req)
	runtime.ReadMemStats(&after)
	require.Equal(t, http.StatusOK, rec.Code, path)
	var m map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &m))
	require.Equal(t, true, m["hasMore"], path)
	return after.TotalAlloc - before.TotalAlloc, answered{len(m["events"].([]any)), rec.Body.Len()}
}

// TestStateListsAreBoundedInItems: a run may end tasks and create more without end; a state?at answer lists at most
// maxStateItems of them, the published state's and a rebuild's alike, and says it is truncated.
func TestStateListsAreBoundedInItems(t *testing.T) {
	f := newFixture(t, Options{})
	var reqs []commands.Request
	for i := range maxStateItems {
		task := fmt.Sprintf("many_%05d", i)
		reqs = append(reqs,
			commands.Request{Actor: audittest.Orchestrator, Command: &commands.TaskCreate{RunID: liveRun, TaskID: task,
				Role: "executor", Agent: "executor"}},
			commands.Request{Actor: audittest.Orchestrator, Command: &commands.TaskTransition{RunID: liveRun,
				TaskID: task, To: "cancelled", Reason: "done"}})
	}
	f.admitAll(reqs)
	for _, at := range []uint64{head(f), head(f) - 1} { // the published state, and a rebuild
		m := f.ok(fmt.Sprintf("/api/v1/runs/%s/state?at=%d", liveRun, at))
		require.Len(t, m["tasks"], maxStateItems, "at %d", at)
		require.True(t, m["truncated"].(bool), "at %d", at)
	}
}

// TestAPageFillsItsBytesToTheLimit: items fit while the page's bytes (each item's JSON and its separator, after the
// bytes used before them) are at most the limit: a page of exactly the limit holds them all, one byte less leaves
// the last out (full). A page's first item always fits; after used bytes, it is left out like any other.
func TestAPageFillsItsBytesToTheLimit(t *testing.T) {
	items := []string{"aaa", "bbb", "ccc"} // `"aaa"` and a separator: 6 bytes each
	for _, tc := range []struct {
		name        string
		used, limit int
		fit         int
		full        bool
	}{
		{"exactly the limit", 0, 18, 3, false},
		{"one byte less", 0, 17, 2, true},
		{"the first always fits", 0, 1, 1, true},
		{"after used bytes, exactly", 6, 24, 3, false},
		{"after used bytes, one less", 6, 23, 2, true},
		{"after used bytes, not even the first", 6, 11, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, size, full, err := encodeWithin(items, tc.used, tc.limit)
			require.NoError(t, err)
			require.Len(t, raw, tc.fit)
			require.Equal(t, tc.full, full)
			if !full {
				require.Equal(t, tc.used+6*len(items), size)
			}
		})
	}
}
