package broker

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/commands"
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
	listed := append(everyItem(t, a, "query.runs", nil, "runs"), everyItem(t, o, "query.tasks", nil, "tasks")...)
	for _, it := range listed {
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
	listed = everyItem(t, ga, "query.runs", nil, "runs")
	require.Len(t, listed, 2)
	require.Equal(t, true, listed[1]["textsOmitted"])
	require.LessOrEqual(t, ga.rd.FrameBytes(), wire.MaxFrameFloor)
}

// A message the socket does not refuse for its size (the orchestrator's and the admin's, an imported one: a body of
// 262,144 chars of six-byte JSON escapes, and one recorded under a larger --max-frame) can be larger than a frame.
// msg.inbox and query.mailbox answered oversize-frame at it for good, no cursor passing it: its recipient read
// neither it nor any message after it, and could not learn its id to acknowledge it. It is sent without its body and
// subject (textsOmitted), every other field as it is, and the pages go on past it.
func TestMessagesLargerThanAFrameAreSentWithoutTheirTexts(t *testing.T) {
	for _, frame := range []int{4096, wire.MaxFrameFloor} {
		t.Run(fmt.Sprint(frame), func(t *testing.T) {
			o, p := orchestratorAndP(t, frame)
			huge := strings.Repeat("<", frame-300) // the request fits in the frame, the message read back does not
			small := strings.Repeat("b", frame/4)  // two or three in a frame: the list takes more than one page
			for i, body := range []string{small, huge, small, small} {
				params := map[string]any{"to": []any{taskP, "parent"}, "body": body}
				if i == 1 {
					params["subject"] = "s"
				}
				o.okUnescaped("msg.send", params)
			}

			pages := pager{t: t, frame: frame}
			for _, read := range []struct {
				c      *client
				method string
				params map[string]any
			}{
				{c: p, method: wire.MethodMsgInbox},
				{c: o, method: wire.MethodMsgInbox},
				{c: o, method: "query.mailbox", params: map[string]any{"taskId": taskP}},
				{c: o, method: "query.mailbox"},
			} {
				ids := pages.all(read.c, read.method, read.params, "messages", "id")
				require.Len(t, ids, 4, read.method)
				items := everyItem(t, read.c, read.method, read.params, "messages")
				require.Contains(t, items[0]["body"], small)
				require.Nil(t, items[0]["textsOmitted"], "a message that fits is sent whole")
				require.Equal(t, true, items[1]["textsOmitted"], read.method)
				require.Equal(t, "", items[1]["body"])
				require.Nil(t, items[1]["subject"])
				require.Equal(t, events.OrchestratorKey, items[1]["from"])
				require.Equal(t, "message", items[1]["kind"])
				require.Contains(t, items[3]["body"], small)
			}

			// Its id, read so, acknowledges it.
			items := everyItem(t, p, wire.MethodMsgInbox, nil, "messages")
			p.ok("mailbox.ack", map[string]any{"taskId": taskP, "messageIds": []any{items[1]["id"]}})
			require.Len(t, everyItem(t, p, wire.MethodMsgInbox, nil, "messages"), 3)
		})
	}
}

// A worker's delegate.request names its delegation's description (512 chars) and model (256 chars), and both its
// shadow task's title and model: in a frame of 4 KiB, which a daemon allows, chars that take six bytes each in JSON
// make the delegation and the task larger than a frame. query.delegations and query.tasks answered oversize-frame at
// them for good, no cursor passing them: one worker left its orchestrator unable to read any later delegation or
// task. Such a delegation, or task, is sent without its title, cwd and model (textsOmitted), every other field as it
// is, and the pages go on past it.
func TestWorkersDelegationsAndQuestionsLargerThanAFrameAreSentWithoutTheirTexts(t *testing.T) {
	const frame = 4096
	o, p := orchestratorAndP(t, frame)
	var subs []string
	for i, desc := range []string{"first", strings.Repeat("<", commands.MaxDescriptionChars), "third"} {
		req := map[string]any{"prompt": "p", "budgetTokens": 1, "description": desc}
		if i == 1 {
			req["model"] = strings.Repeat("<", commands.MaxModelChars)
		}
		subs = append(subs, p.okUnescaped("delegate.request", req)["grandchildTaskRef"].(string))
		if i != 1 { // two may be in flight
			o.ok("delegate.settle", map[string]any{"subId": subs[i], "outcome": "ok", "text": "done"})
		}
	}

	delegations := everyItem(t, o, "query.delegations", nil, "delegations")
	require.Len(t, delegations, 3)
	for i, d := range delegations {
		require.Equal(t, subs[i], d["subId"])
	}
	require.Equal(t, true, delegations[1]["textsOmitted"])
	require.Equal(t, "", delegations[1]["title"])
	require.Equal(t, taskP, delegations[1]["parentTaskId"])
	require.Equal(t, "queued", delegations[1]["status"])
	require.Nil(t, delegations[0]["textsOmitted"], "a delegation that fits is sent whole")
	require.Equal(t, "delegate: first", delegations[0]["title"])

	// So are a worker's options to its question: up to 16 of 256 chars, as many as its request carries.
	options := make([]any, 12)
	for i := range options {
		options[i] = strings.Repeat("<", commands.MaxAskOptionChars)
	}
	question := p.okUnescaped("wait.request", map[string]any{"question": "?", "options": options})["questionId"]

	tasks := everyItem(t, o, "query.tasks", nil, "tasks")
	require.Len(t, tasks, 5)
	require.Equal(t, taskP, tasks[0]["id"])
	require.Equal(t, true, tasks[0]["textsOmitted"])
	require.Equal(t, "waiting", tasks[0]["status"])
	require.Equal(t, map[string]any{"questionId": question, "askedAt": tasks[0]["waiting"].(map[string]any)["askedAt"],
		"deadline": tasks[0]["waiting"].(map[string]any)["deadline"]}, tasks[0]["waiting"])
	require.Equal(t, subs[1], tasks[3]["id"])
	require.Equal(t, true, tasks[3]["textsOmitted"])
	require.Equal(t, "", tasks[3]["title"])
	require.Nil(t, tasks[2]["textsOmitted"])
	require.Equal(t, "delegate: first", tasks[2]["title"])
}

// orchestratorAndP are the orchestrator's and task P's connections to a seeded daemon of frame bytes.
func orchestratorAndP(t *testing.T, frame int) (o, p *client) {
	f := newFixture(t, fixtureOpts{opts: Options{MaxFrame: frame}})
	s := f.seed()
	o, p = f.dial(), f.dial()
	o.hello(runR, events.OrchestratorKey, s.orch)
	p.hello(runR, taskP, s.p)
	return o, p
}

// longestRunID starts a daemon of the smallest frame, with a running run of the longest id (its run.create's params
// and more), and its orchestrator.
func longestRunID(t *testing.T, more map[string]any) (f *fixture, o *client, runID string) {
	f = newFixture(t, fixtureOpts{opts: Options{MaxFrame: wire.MaxFrameFloor}})
	a := f.dial()
	a.helloAdmin()
	runID = strings.Repeat("r", commands.MaxRunIDChars)
	create := map[string]any{"runId": runID, "team": "t", "goal": "g", "cwd": "/w"}
	maps.Copy(create, more)
	orch := a.ok("run.create", create)["orchestratorToken"]
	o = f.dial()
	o.hello(runID, events.OrchestratorKey, orch.(string))
	o.ok("run.transition", map[string]any{"to": "running"})
	return f, o, runID
}

// largeThenSmall reads the two items of key that method lists, one a page, each answer within the smallest frame: a
// large item and the small one after it.
func largeThenSmall(t *testing.T, c *client, method, key string) (large, small map[string]any) {
	t.Helper()
	items := everyItem(t, c, method, nil, key)
	require.LessOrEqual(t, c.rd.FrameBytes(), wire.MaxFrameFloor)
	require.Len(t, items, 2, "every item is listed, the one after the large one too")
	return items[0], items[1]
}

// everyItem reads every page of method with params, one item a page, and returns the items of key.
func everyItem(t *testing.T, c *client, method string, params map[string]any, key string) []map[string]any {
	t.Helper()
	var out []map[string]any
	seen := cursorsSeen{}
	for cursor := ""; ; {
		req := map[string]any{"limit": 1}
		for k, v := range params {
			req[k] = v
		}
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
		seen.follow(t, next, method)
		cursor = next
	}
}
