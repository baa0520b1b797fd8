package broker

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// TestEventsSinceLargeEventsKeepTheirData: in a run of 100 KB messages a page holds two, and the third opens the
// next page with its data, rather than being sent omitted because it did not fit in what was left of the page.
// Only an event too large for a page of its own is omitted.
func TestEventsSinceLargeEventsKeepTheirData(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	s := f.seed()
	o := f.dial()
	o.hello(runR, events.OrchestratorKey, s.orch)
	const n = 10
	for i := range n {
		o.ok("msg.send", map[string]any{"to": taskP, "body": fmt.Sprintf("%d:%s", i, strings.Repeat("x", 100_000))})
	}
	p := f.dial()
	p.hello(runR, taskP, s.p)
	since, pages, bodies := 0.0, 0, 0
	for {
		res := p.ok("events.since", map[string]any{"sinceSeq": since})
		pages++
		for _, raw := range res["events"].([]any) {
			ev := raw.(map[string]any)
			require.NotEqual(t, true, ev["metadata"].(map[string]any)["omitted"], "event %v omitted", ev["metadata"])
			if ev["type"] == events.TypeMailboxAppended {
				require.Len(t, ev["data"].(map[string]any)["body"], 100_004, "the body arrives whole, JSON-encoded")
				bodies++
			}
		}
		if res["hasMore"] != true {
			break
		}
		next := res["nextSeq"].(float64)
		require.Greater(t, next, since, "events.since after %v: more, at a nextSeq that moves on by nothing", since)
		since = next
	}
	require.Equal(t, n, bodies)
	require.GreaterOrEqual(t, pages, n/2, "two 100 KB events per 256 KB page")

	// With a 16 KiB frame a 16,200-char message fits a request but its event cannot fit any page: it alone is sent
	// omitted, and paging goes on.
	small := newFixture(t, fixtureOpts{opts: Options{MaxFrame: 16 << 10}})
	ss := small.seed()
	so := small.dial()
	so.hello(runR, events.OrchestratorKey, ss.orch)
	so.ok("msg.send", map[string]any{"to": taskP, "body": strings.Repeat("y", 16_200)})
	so.ok("msg.send", map[string]any{"to": taskP, "body": "small"})
	sp := small.dial()
	sp.hello(runR, taskP, ss.p)
	res := sp.ok("events.since", map[string]any{})
	var omitted, whole []string
	for _, raw := range res["events"].([]any) {
		ev := raw.(map[string]any)
		if ev["type"] != events.TypeMailboxAppended {
			continue
		}
		if ev["metadata"].(map[string]any)["omitted"] == true {
			omitted = append(omitted, fmt.Sprint(ev["data"]))
		} else {
			whole = append(whole, ev["data"].(map[string]any)["body"].(string))
		}
	}
	require.Len(t, omitted, 1)
	require.Equal(t, []string{`"small"`}, whole)
}

// TestTwoThousandDelegationsReadableByPages: a run with 2,000 delegations (2,002 tasks, 2,000 accounts) is fully
// readable through query.tasks, query.delegations and query.ledger by following nextCursor, each item once and in
// creation order; the largest page is cut to what fits in a frame instead of failing oversize-frame.
func TestTwoThousandDelegationsReadableByPages(t *testing.T) {
	if testing.Short() {
		t.Skip("2,000 delegations")
	}
	f := newFixture(t, fixtureOpts{})
	o, p := f.meteredRun()
	const n = 2000
	want := make([]string, 0, n)
	for i := range n {
		sub := p.ok("delegate.request", map[string]any{"prompt": fmt.Sprintf("look %d", i),
			"description": strings.Repeat("d", 200), "budgetTokens": 1})["grandchildTaskRef"].(string)
		o.ok("delegate.settle", map[string]any{"subId": sub, "outcome": "ok", "text": "done"})
		want = append(want, sub)
	}

	readAll := func(method, key, id string, minPages int) []string {
		var ids []string
		cursor, pages, seen := "", 0, cursorsSeen{}
		for {
			params := map[string]any{"limit": 1000}
			if cursor != "" {
				params["cursor"] = cursor
			}
			res := o.ok(method, params)
			pages++
			require.EqualValues(t, res["hasMore"], res["nextCursor"] != nil)
			for _, it := range res[key].([]any) {
				ids = append(ids, it.(map[string]any)[id].(string))
			}
			if res["hasMore"] != true {
				require.GreaterOrEqual(t, pages, minPages, "%s: 1000 items do not fit one frame: the page is cut", method)
				return ids
			}
			cursor = res["nextCursor"].(string)
			seen.follow(t, cursor, method)
		}
	}
	require.Equal(t, want, readAll("query.delegations", "delegations", "subId", 3))
	require.Equal(t, append([]string{taskP}, want...), readAll("query.tasks", "tasks", "id", 3))
	ledger := readAll("query.ledger", "accounts", "taskId", 1)
	require.Equal(t, []string{taskP}, ledger, "one account, the parent's")

	// The whole result of a cut page still fits in a frame.
	res := o.call("query.delegations", map[string]any{"limit": 1000})
	b, err := json.Marshal(res)
	require.NoError(t, err)
	require.Less(t, len(b), 262144)
}

// TestLedgerHistoryPagedWhenTooLarge: with a 16 KiB frame, a parent's account after 300 metered delegations is too
// large to send whole: query.ledger sends it without its history (historyOmitted), and query.ledger {taskId} pages
// the history — every reservation once, in order — so nothing is out of reach.
func TestLedgerHistoryPagedWhenTooLarge(t *testing.T) {
	f := newFixture(t, fixtureOpts{opts: Options{MaxFrame: 16 << 10}})
	o, p := f.meteredRun()
	const n = 300
	want := settledDelegations(o, p, n)

	res := o.ok("query.ledger", nil)
	accounts := res["accounts"].([]any)
	require.Len(t, accounts, 1)
	acct := accounts[0].(map[string]any)
	require.Equal(t, true, acct["historyOmitted"])
	require.Nil(t, acct["reservations"])
	require.EqualValues(t, n*9, acct["tokensSpent"], "the totals are whole")

	reserved, charged, pages := o.readLedgerHistory(2*n, nil)
	require.Greater(t, pages, 2, "600 entries do not fit one 16 KiB frame")
	require.Equal(t, want, reserved)
	require.Equal(t, want, charged)
	require.Equal(t, wire.CodeNoTask, o.fails("query.ledger", map[string]any{"taskId": "nobody"}, wire.CodeNoTask).Code)
}

// settledDelegations has P delegate n times, each reserving 7 tokens, and the orchestrator settle each at 9 used
// (a charge of 2); it returns their subIds.
func settledDelegations(o, p *client, n int) []string {
	subs := make([]string, 0, n)
	for range n {
		sub := p.ok("delegate.request", map[string]any{"prompt": "look", "budgetTokens": 7})["grandchildTaskRef"].(string)
		o.ok("delegate.settle", map[string]any{"subId": sub, "outcome": "ok", "text": "done", "usageTokens": 9})
		subs = append(subs, sub)
	}
	return subs
}

// historyPage is an answer of query.ledger {taskId}.
type historyPage struct {
	Reservations []projections.Reservation `json:"reservations"`
	Charges      []projections.Charge      `json:"charges"`
	NextCursor   string                    `json:"nextCursor"`
	HasMore      bool                      `json:"hasMore"`
	Total        int                       `json:"total"`
}

// readLedgerHistory reads P's account history of total entries by following its cursor, asking 1,000 entries a
// page, and returns the subIds of its reservations and of its charges in the order read, and the pages it took.
// onPage, when not nil, sees each page but the last (after its entries are counted) with its answer's bytes.
func (c *client) readLedgerHistory(total int, onPage func(raw []byte, h historyPage)) (reserved, charged []string, pages int) {
	c.t.Helper()
	cursor, seen := "", cursorsSeen{}
	for {
		params := map[string]any{"taskId": taskP, "limit": 1000}
		if cursor != "" {
			params["cursor"] = cursor
		}
		r := c.call("query.ledger", params)
		require.Nil(c.t, r.Error)
		var h historyPage
		require.NoError(c.t, json.Unmarshal(r.Result, &h))
		pages++
		require.Equal(c.t, total, h.Total)
		for _, res := range h.Reservations {
			reserved = append(reserved, res.SubID)
		}
		for _, ch := range h.Charges {
			charged = append(charged, ch.SubID)
		}
		if !h.HasMore {
			return reserved, charged, pages
		}
		if onPage != nil {
			onPage(r.Result, h)
		}
		seen.follow(c.t, h.NextCursor, "query.ledger")
		cursor = h.NextCursor
	}
}

// meteredRun creates run R with a budget and its running parent P, and returns the orchestrator's and P's
// connections.
func (f *fixture) meteredRun() (orch, parent *client) {
	f.t.Helper()
	a := f.dial()
	a.helloAdmin()
	orch = f.dial()
	orch.hello(runR, events.OrchestratorKey, a.ok("run.create", map[string]any{"runId": runR, "team": "t", "goal": "g",
		"cwd": "/w", "budgetTotal": 100_000_000})["orchestratorToken"].(string))
	orch.ok("run.transition", map[string]any{"to": "running"})
	orch.ok("task.create", map[string]any{"taskId": taskP, "role": "executor", "agent": "a", "title": "P", "cwd": "/w/P"})
	orch.ok("task.transition", map[string]any{"taskId": taskP, "to": "running"})
	parent = f.dial()
	parent.hello(runR, taskP, orch.ok("credential.issue", map[string]any{"taskId": taskP})["token"].(string))
	return orch, parent
}

// TestRunsPageLooksAtBoundedRuns: a page of query.runs looks at most at MaxRunsScan runs, whatever its status
// filter, as the dashboard's runs list does: a status that matches few of many runs answers a page of fewer runs, or
// none, with the cursor of the next run to look at, and the pages together hold every run it matches, once.
func TestRunsPageLooksAtBoundedRuns(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.seed() // runR, running
	reqs := make([]commands.Request, MaxRunsScan+1)
	for i := range reqs {
		reqs[i] = commands.Request{Actor: events.Actor{Role: events.RoleAdmin}, Command: &commands.RunCreate{
			RunID: fmt.Sprintf("bulk-%05d", i), Team: "bulk", Goal: "wait", Cwd: "/w"}}
	}
	replies, err := f.eng.SubmitAll(t.Context(), reqs)
	require.NoError(t, err)
	for _, r := range replies {
		require.Nil(t, r.Rejected, "%v", r.Rejected)
	}
	a := f.dial()
	a.helloAdmin()
	for _, newest := range []bool{false, true} {
		params := map[string]any{"status": "running", "newest": newest}
		require.NotEmpty(t, a.ok("query.runs", params)["nextCursor"], "newest %v", newest)
		var got []any
		for pages := 0; ; pages++ {
			require.Less(t, pages, 10, "newest %v", newest)
			page := a.ok("query.runs", params)
			got = append(got, page["runs"].([]any)...)
			next, _ := page["nextCursor"].(string)
			if next == "" {
				break
			}
			params["cursor"] = next
		}
		require.Len(t, got, 1, "newest %v", newest)
		require.Equal(t, runR, got[0].(map[string]any)["runId"], "newest %v", newest)
	}
}

// TestRunsStatusIsARunStatus: query.runs refuses a status that is not a run status, as protocol.json's enum and the
// dashboard's runs list do, rather than answering every page of such a filter empty.
func TestRunsStatusIsARunStatus(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.seed()
	a := f.dial()
	a.helloAdmin()
	for _, status := range []any{"runing", []string{"running", "done"}, "Running"} {
		e := a.fails("query.runs", map[string]any{"status": status}, wire.CodeBadParams)
		require.Contains(t, e.Message, "status", "%v", status)
	}
	require.Len(t, a.ok("query.runs", map[string]any{"status": []string{"running", "completed"}})["runs"], 1)
}
