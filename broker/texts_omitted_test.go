package broker

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/events"
)

// A run's goal (up to 262,144 chars) and the free text of a status change (a task's error: pi-crew's holds a worker's
// captured stderr, up to 512 KiB) can each be larger than a frame. A run or a task holding one was answered
// oversize-frame for good: query.run and the page of query.runs or query.tasks that reached it, which no cursor could
// pass, so crewctl runs, show run and tasks stopped there. Such an item is sent with its long texts left out
// (textsOmitted), every other field as it is, and the pages go on past it.
func TestItemsLargerThanAFrameAreSentWithoutTheirTexts(t *testing.T) {
	const frame = 4096
	f := newFixture(t, fixtureOpts{opts: Options{MaxFrame: frame}})
	s := f.seed()
	a, o := f.dial(), f.dial()
	a.helloAdmin()
	o.hello(runR, events.OrchestratorKey, s.orch)
	huge := strings.Repeat("界", 1300) // 3,900 bytes: the request fits in the frame, the item with it does not
	runs := []string{runR}
	for _, id := range []string{"R02", "R03", "R04", "R05"} {
		goal := strings.Repeat("g", 1200) // more than one page, each run fitting
		if id == "R03" {
			goal = huge
		}
		a.ok("run.create", map[string]any{"runId": id, "team": "t", "goal": goal, "cwd": "/w"})
		runs = append(runs, id)
	}
	tasks := []string{taskP, taskQ}
	for _, id := range []string{"T1", "T2", "T3", "T4", "T5", "T6"} {
		o.ok("task.create", map[string]any{"taskId": id, "role": "executor", "agent": "a", "title": strings.Repeat(id, 300),
			"cwd": "/w"})
		tasks = append(tasks, id)
	}
	o.ok("task.transition", map[string]any{"taskId": "T3", "to": "running"})
	o.ok("task.transition", map[string]any{"taskId": "T3", "to": "failed", "error": huge})

	pages := pager{t: t, frame: frame}
	require.Equal(t, runs, pages.all(a, "query.runs", nil, "runs", "runId"))
	require.Equal(t, tasks, pages.all(o, "query.tasks", nil, "tasks", "id"))

	r := a.call("query.run", map[string]any{"runId": "R03"})
	require.Nil(t, r.Error)
	require.LessOrEqual(t, a.rd.FrameBytes(), frame)
	var run map[string]any
	require.NoError(t, json.Unmarshal(r.Result, &run))
	require.Equal(t, true, run["textsOmitted"])
	require.Equal(t, "", run["goal"])
	require.Equal(t, "R03", run["runId"])
	require.Equal(t, "queued", run["status"])

	byID := map[string]map[string]any{}
	for _, it := range append(everyItem(t, a, "query.runs", "runs"), everyItem(t, o, "query.tasks", "tasks")...) {
		id, ok := it["runId"].(string)
		if it["id"] != nil {
			id, ok = it["id"].(string)
		}
		require.True(t, ok)
		byID[id] = it
	}
	require.Equal(t, true, byID["R03"]["textsOmitted"])
	require.Equal(t, "", byID["R03"]["goal"])
	require.Nil(t, byID["R02"]["textsOmitted"], "a run that fits is sent whole")
	require.Equal(t, strings.Repeat("g", 1200), byID["R02"]["goal"])
	require.Equal(t, true, byID["T3"]["textsOmitted"])
	require.Equal(t, "failed", byID["T3"]["status"])
	require.Nil(t, byID["T3"]["error"])
	require.Nil(t, byID["T2"]["textsOmitted"])

	// The smallest frame a daemon allows holds such a run too.
	g := newFixture(t, fixtureOpts{opts: Options{MaxFrame: wire.MaxFrameFloor}})
	g.seed()
	ga := g.dial()
	ga.helloAdmin()
	ga.ok("run.create", map[string]any{"runId": "R02", "team": "t", "goal": strings.Repeat("界", 300), "cwd": "/w"})
	r = ga.call("query.run", map[string]any{"runId": "R02"})
	require.Nil(t, r.Error)
	require.LessOrEqual(t, ga.rd.FrameBytes(), wire.MaxFrameFloor)
	var one map[string]any
	require.NoError(t, json.Unmarshal(r.Result, &one))
	require.Equal(t, true, one["textsOmitted"])
	listed := everyItem(t, ga, "query.runs", "runs")
	require.Len(t, listed, 2)
	require.Equal(t, true, listed[1]["textsOmitted"])
	require.LessOrEqual(t, ga.rd.FrameBytes(), wire.MaxFrameFloor)
}

// everyItem reads every page of method, one item a page, and returns the items of key.
func everyItem(t *testing.T, c *client, method, key string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for cursor := ""; ; {
		req := map[string]any{"limit": 1}
		if cursor != "" {
			req["cursor"] = cursor
		}
		res := c.ok(method, req)
		for _, it := range res[key].([]any) {
			out = append(out, it.(map[string]any))
		}
		next, more := res["nextCursor"].(string)
		if !more {
			return out
		}
		cursor = next
	}
}
