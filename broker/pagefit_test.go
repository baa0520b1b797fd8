package broker

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// TestPagesAtTheSmallestFrame: in a frame of the smallest size a daemon allows, every paged read of a run of small
// items — tasks, delegations, mailboxes, inboxes, events — holds at least one item a page, each answer within the
// frame, and every item is read once by following its cursor.
func TestPagesAtTheSmallestFrame(t *testing.T) {
	frame := wire.MaxFrameFloor
	f := newFixture(t, fixtureOpts{opts: Options{MaxFrame: frame}})
	s := f.seed()
	o, p := f.dial(), f.dial()
	o.hello(runR, events.OrchestratorKey, s.orch)
	p.hello(runR, taskP, s.p)
	for i := range 6 {
		o.ok("task.create", map[string]any{"taskId": fmt.Sprint("T", i), "role": "executor", "agent": "a",
			"title": strings.Repeat("t", 100), "cwd": "/w"})
		o.ok("msg.send", map[string]any{"to": taskP, "body": strings.Repeat("b", 200)})
		o.ok("msg.send", map[string]any{"to": "parent", "body": strings.Repeat("b", 200)})
		sub := p.ok("delegate.request", map[string]any{"prompt": "p", "budgetTokens": 1,
			"description": strings.Repeat("d", 100)})["grandchildTaskRef"].(string)
		o.ok("delegate.settle", map[string]any{"subId": sub, "outcome": "ok", "text": "done"})
	}

	pages := pager{t: t, frame: frame}
	for _, list := range []struct {
		c               *client
		method, key, id string
		params          map[string]any
		minItems        int
	}{
		{c: o, method: "query.tasks", key: "tasks", id: "id", minItems: 8},
		{c: o, method: "query.delegations", key: "delegations", id: "subId", minItems: 6},
		{c: o, method: "query.mailbox", key: "messages", id: "id", params: map[string]any{"taskId": taskP}, minItems: 6},
		{c: o, method: wire.MethodMsgInbox, key: "messages", id: "id", minItems: 6},
		{c: p, method: wire.MethodMsgInbox, key: "messages", id: "id", minItems: 6},
	} {
		ids := pages.all(list.c, list.method, list.params, list.key, list.id)
		require.GreaterOrEqual(t, len(ids), list.minItems, list.method)
	}
	seqs := pages.since(o)
	require.Greater(t, len(seqs), 40)
	for i, seq := range seqs {
		require.EqualValues(t, i+1, seq, "events.since: a gap or a repeat")
	}
}

// TestRunsCheckpointsAndCallsCutToTheFrame: in a frame of 4 KiB, and in the smallest a daemon allows, the runs, an
// import's checkpoints and a job's calls, whose pages would not fit in one frame, are read whole by following their
// cursor: every item exactly once, in order, each answer within the frame and holding at least one item.
func TestRunsCheckpointsAndCallsCutToTheFrame(t *testing.T) {
	for _, frame := range []int{4096, wire.MaxFrameFloor} {
		t.Run(fmt.Sprint(frame), func(t *testing.T) {
			f := newFixture(t, fixtureOpts{opts: Options{MaxFrame: frame}})
			s := f.seed()
			a, o, p := f.dial(), f.dial(), f.dial()
			a.helloAdmin()
			o.hello(runR, events.OrchestratorKey, s.orch)
			p.hello(runR, taskP, s.p)
			// A few hundred bytes each, a dozen or more: none alone too large for the frame, together several frames.
			runs := []string{runR}
			for i := range 12 {
				id := fmt.Sprintf("R%02d", i+2)
				a.ok("run.create", map[string]any{"runId": id, "team": "t", "goal": strings.Repeat("g", 200), "cwd": "/w"})
				runs = append(runs, id)
			}
			var paths []string // each long enough to be named by its digest as a cursor
			for i := range 12 {
				path := fmt.Sprintf("/%02d/%s", i, strings.Repeat("p", 300))
				a.ok(methodImportAppend, importCheckpoint(fmt.Sprint("c", i), path))
				paths = append(paths, path)
			}
			nonce := o.ok("job.create", map[string]any{"jobId": "J", "taskId": taskP, "tools": testGrant})["nonce"].(string)
			o.ok("lease.open", map[string]any{"jobId": "J", "mode": "start", "rootToolCallId": "root-1"})
			var calls []string // each page beside the job's grant and counts
			for i := range 20 {
				id := fmt.Sprintf("%02d-%s", i, strings.Repeat("r", 100))
				p.ok("proxy.request", map[string]any{"jobId": "J", "requestId": id, "nonce": nonce, "tool": "read"})
				calls = append(calls, id)
			}

			pages := pager{t: t, frame: frame}
			require.Equal(t, runs, pages.all(a, "query.runs", nil, "runs", "runId"))
			newest := slices.Clone(runs)
			slices.Reverse(newest)
			require.Equal(t, newest, pages.all(a, "query.runs", map[string]any{"newest": true}, "runs", "runId"))
			require.Equal(t, paths, pages.all(a, methodImportCheckpoints, map[string]any{"source": "test"},
				"checkpoints", "path"))
			require.Equal(t, calls, pages.all(o, "query.job", map[string]any{"jobId": "J", "limit": 500},
				"requests", "requestId"))
		})
	}
}

// pager reads every page of a list, each answer held to the frame.
type pager struct {
	t     *testing.T
	frame int
}

// all follows nextCursor from the first page of method to its last, with the largest limit each allows, and
// returns the id field of every item of key in the order read, requiring every id once, each page within the
// frame with at least one item, and more than one page.
func (pg pager) all(c *client, method string, params map[string]any, key, id string) []string {
	t := pg.t
	t.Helper()
	var ids []string
	cursor, pages, cursors := "", 0, cursorsSeen{}
	for {
		req := map[string]any{"limit": 1000}
		for k, v := range params {
			req[k] = v
		}
		if cursor != "" {
			req["cursor"] = cursor
		}
		r := c.call(method, req)
		require.Nil(t, r.Error, "%s page %d", method, pages+1)
		require.LessOrEqual(t, c.rd.FrameBytes(), pg.frame, "%s page %d", method, pages+1)
		var res map[string]any
		require.NoError(t, json.Unmarshal(r.Result, &res))
		pages++
		items := res[key].([]any)
		require.NotEmpty(t, items, "%s page %d holds no item", method, pages)
		for _, it := range items {
			ids = append(ids, it.(map[string]any)[id].(string))
		}
		next, more := res["nextCursor"].(string)
		if !more {
			break
		}
		cursors.follow(t, next, method)
		cursor = next
	}
	require.Greater(t, pages, 1, "%s: the list fits one frame, which tests nothing", method)
	seen := map[string]bool{}
	for _, id := range ids {
		require.False(t, seen[id], "%s: %s twice", method, id)
		seen[id] = true
	}
	return ids
}

// since reads every page of the run's events and returns their seqs, each page within the frame with at least one
// event.
func (pg pager) since(c *client) []float64 {
	t := pg.t
	t.Helper()
	var seqs []float64
	since := 0.0
	for {
		r := c.call(wire.MethodEventsSince, map[string]any{"sinceSeq": since})
		require.Nil(t, r.Error, "events.since after %v", since)
		require.LessOrEqual(t, c.rd.FrameBytes(), pg.frame)
		var res map[string]any
		require.NoError(t, json.Unmarshal(r.Result, &res))
		evs := res["events"].([]any)
		if res["hasMore"] != true && len(evs) == 0 {
			return seqs
		}
		require.NotEmpty(t, evs, "events.since after %v holds no event", since)
		for _, ev := range evs {
			seqs = append(seqs, ev.(map[string]any)["metadata"].(map[string]any)["seq"].(float64))
		}
		next := res["nextSeq"].(float64)
		require.Greater(t, next, since, "events.since after %v: a nextSeq that moves on by nothing", since)
		since = next
		if res["hasMore"] != true {
			return seqs
		}
	}
}

// TestPageEnvelopeHoldsEveryPagedAnswer: pageEnvelope holds what each paged answer takes besides its items, its
// id and its next cursor's value, with its counts at their longest.
func TestPageEnvelopeHoldsEveryPagedAnswer(t *testing.T) {
	const cursor, history = "z", "\u2028<"
	paged := func(key string) any {
		return pagedResult(key, page[int]{items: []int{}, next: cursor, total: math.MinInt})
	}
	for name, result := range map[string]any{
		"tasks": paged("tasks"), "delegations": paged("delegations"), "accounts": paged("accounts"),
		"messages":    inboxResult{Messages: []wireMessage{}, NextCursor: cursor, HasMore: true, Total: math.MinInt},
		"runs":        runsResult{Runs: nil, NextCursor: cursor},
		"jobs":        jobsResult{Jobs: nil, NextCursor: cursor},
		"checkpoints": importCheckpointsResult{Checkpoints: nil, NextCursor: cursor},
		"events":      sincePage{nextSeq: math.MaxUint64}.result(), // hasMore false: its longest
		"history": accountHistoryOf(history, projections.LedgerHistory{Reservations: []projections.Reservation{},
			Charges: []projections.Charge{}, NextCursor: cursor, Total: math.MinInt}),
		"dependsOn": taskDependsOnPage{TaskID: history, DependsOn: []string{}, NextCursor: cursor, HasMore: true,
			Total: math.MinInt},
	} {
		raw, ok := result.(compactResult)
		if !ok {
			b, err := json.Marshal(result)
			require.NoError(t, err)
			raw = b
		}
		const id = "\u2028<"
		frame, err := wire.AppendCompactResponse(nil, id, json.RawMessage(raw), wire.MaxFrameCeiling)
		require.NoError(t, err)
		around := len(frame) - jsonLen(id)
		if name != "events" {
			around -= cursorBytes(cursor)
		}
		if name == "history" {
			around -= len(historyAround) + jsonLen(history)
		}
		if name == "dependsOn" {
			around -= len(dependsOnAround) + jsonLen(history)
		}
		require.LessOrEqual(t, around, pageEnvelope, "%s: %s", name, frame)
	}
}

// TestLedgerHistoryPagesFillTheFrame: an account's history too large for a 4 KiB frame is paged by cursor, every
// reservation and charge once and in order, and each page but the last is cut where the next entry would not fit
// (fitPage), not at some fraction of the limit asked for.
func TestLedgerHistoryPagesFillTheFrame(t *testing.T) {
	const maxFrame = 4096
	f := newFixture(t, fixtureOpts{opts: Options{MaxFrame: maxFrame}})
	o, p := f.meteredRun()
	const n = 60
	want := settledDelegations(o, p, n)
	var entries [][]byte // the history as the wire shows it
	f.eng.Read(func(st *projections.State) {
		h, ok, err := st.AccountHistory(runR, taskP, projections.PageFilter{Limit: 2 * n})
		require.True(t, ok)
		require.NoError(t, err)
		for _, r := range h.Reservations {
			b, _ := json.Marshal(r)
			entries = append(entries, b)
		}
		for _, c := range h.Charges {
			b, _ := json.Marshal(c)
			entries = append(entries, b)
		}
	})

	read := 0
	reserved, charged, pages := o.readLedgerHistory(2*n, func(raw []byte, h historyPage) {
		require.LessOrEqual(t, len(raw), maxFrame)
		read += len(h.Reservations) + len(h.Charges)
		next := entries[read]
		require.Greater(t, len(raw)+len(next)+1, maxFrame-2*pageEnvelope,
			"a page of %d bytes ends with room for the next entry, %s", len(raw), next)
	})
	require.Greater(t, pages, 1, "%d entries do not fit one 4 KiB frame", 2*n)
	require.Equal(t, want, reserved)
	require.Equal(t, want, charged)
}

// TestPageBudgetCountsTheIDAsWritten: a page is cut to the room its answer's writer leaves beside the request's id
// as it writes it. An id of 250 '<', sent and answered as 250 bytes, leaves a page of the smallest frame as many
// tasks as an id of 250 'a' does — where it was counted as json.Marshal escapes it, 1,500 bytes, and the page was
// refused oversize-frame although its answer fitted.
func TestPageBudgetCountsTheIDAsWritten(t *testing.T) {
	f := newFixture(t, fixtureOpts{opts: Options{MaxFrame: wire.MaxFrameFloor}})
	s := f.seed()
	o := f.dial()
	o.hello(runR, events.OrchestratorKey, s.orch)
	var tasks []int
	for _, prefix := range []string{strings.Repeat("a", 250), strings.Repeat("<", 250)} {
		o.idPrefix = prefix
		r := o.call("query.tasks", map[string]any{})
		require.Nil(t, r.Error, "id of %q…", prefix[:1])
		var page struct{ Tasks []json.RawMessage }
		require.NoError(t, json.Unmarshal(r.Result, &page))
		require.NotEmpty(t, page.Tasks)
		tasks = append(tasks, len(page.Tasks))
	}
	require.Equal(t, tasks[0], tasks[1], "the same room for both ids")
}
