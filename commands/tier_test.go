package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// tierRuns is how many runs tierWorkload makes; T00 and T01 never end.
const tierRuns = 10

// tierWorkload drives the engine through runs that live and end: tasks,
// credentials, usage, messages, questions (answered, and left to expire),
// delegations (settled, and refused a slot while T00 holds the pool), and
// an end for every run but T00 and T01. With no retention, the ended runs go
// cold as soon as nothing daemon-wide holds them.
func tierWorkload(t *testing.T, f *engineFixture) {
	submit, must := f.submitAs, func(actor events.Actor, c Command) Reply {
		t.Helper()
		r := f.submitAs(actor, c)
		require.Nil(t, r.Rejected, "%s", c.Kind())
		return r
	}
	cfg := projections.DefaultConfig()
	cfg.MaxSlots, cfg.SlotShare = 4, 2
	must(admin, &Configure{Config: cfg})
	for i := 0; i < tierRuns; i++ {
		run := fmt.Sprintf("T%02d", i)
		must(admin, &RunCreate{RunID: run, Team: "t", Goal: "g", Cwd: "/w", BudgetTotal: optBudget(int64(100000 * (i % 3)))})
		must(orchestrator, &RunTransition{RunID: run, To: "running"})
		must(orchestrator, &TaskCreate{RunID: run, TaskID: "02_exec", Role: "executor", Agent: "a", Title: "x", Cwd: "/w", StepID: "s"})
		must(orchestrator, &TaskCreate{RunID: run, TaskID: "03_rev", Role: "reviewer", Agent: "a", Title: "y", Cwd: "/w", StepID: "r"})
		must(orchestrator, &TaskTransition{RunID: run, TaskID: "02_exec", To: "running"})
		must(admin, &CredentialIssue{RunID: run, TaskID: "02_exec", Digest: fmt.Sprintf("%064x", i)})
		must(worker("02_exec"), &TaskUsage{RunID: run, TaskID: "02_exec", Input: int64(100 * i), Output: 10, Turns: 1})
		must(orchestrator, &MessageSend{RunID: run, To: []string{"02_exec"}, Body: "start " + run})
		must(worker("02_exec"), &MessageSend{RunID: run, FromTask: "02_exec", To: []string{"03_rev"}, Body: "look"})
		var q WaitResult
		require.NoError(t, json.Unmarshal(must(worker("02_exec"), &WaitRequest{RunID: run, TaskID: "02_exec", Question: "ok?", TimeoutSec: ptr(60.0)}).Result, &q))
		if i%2 == 0 {
			must(orchestrator, &WaitResolve{RunID: run, TaskID: "02_exec", QuestionID: q.QuestionID})
		}
		// T00 takes two slots and keeps them, T02 one that it still holds
		// when it ends; every other run gets the last, and is refused
		// another (and waits).
		for k := 0; k < 2; k++ {
			submit(worker("02_exec"), &DelegateRequest{RunID: run, TaskID: "02_exec", Prompt: "p", BudgetTokens: ptr(int64(500))})
		}
		var mine []projections.Delegation
		f.eng.Read(func(s *projections.State) { mine = s.Delegations(run) })
		for _, d := range mine {
			if run != "T00" && run != "T02" && !d.Status.Terminal() {
				must(orchestrator, &DelegateSpawned{RunID: run, SubID: d.SubID, PID: 100 + i})
				must(orchestrator, &DelegateSettle{RunID: run, SubID: d.SubID, Outcome: OutcomeOK, Text: "done", UsageTokens: ptr(int64(700))})
			}
		}
		var box projections.MailboxPage
		f.eng.Read(func(s *projections.State) { box, _ = s.Mailbox(run, "02_exec", projections.MailboxFilter{}) })
		if len(box.Messages) > 0 && i%3 == 1 {
			must(orchestrator, &MailboxAck{RunID: run, Recipient: "02_exec", MessageIDs: []string{box.Messages[0].ID}})
		}
		if i >= 2 {
			end := []string{"completed", "failed", "cancelled"}[i%3]
			must(orchestrator, &RunTransition{RunID: run, To: end})
		}
	}
	// The unanswered questions expire: their runs may go cold then.
	f.clock.Advance(2 * time.Minute)
	require.Positive(t, f.eng.Tick(context.Background()))
	f.eng.Read(func(s *projections.State) {
		require.False(t, s.IsCold("T02"), "a run holding a slot stays hot")
		require.True(t, s.IsCold("T03"), "an ended run holding nothing goes cold")
	})
	f.clock.Advance(time.Second)
	must(orchestrator, &TaskUsage{RunID: "T01", TaskID: "02_exec", Input: 5, Turns: 1})
}

// submitAs submits c as actor, requires an answer (a rejection is one),
// and moves the clock on a second.
func (f *engineFixture) submitAs(actor events.Actor, c Command) Reply {
	f.t.Helper()
	r, err := f.eng.Submit(context.Background(), Request{Actor: actor, Command: c})
	require.NoError(f.t, err)
	f.clock.Advance(time.Second)
	return r
}

// touchCold sends commands to cold runs, calling after once after each: a
// reopened run that then works and ends again, a revoked credential, a
// message, a refused delegation and a repeated end.
func touchCold(t *testing.T, f *engineFixture, after func()) {
	f.eng.Read(func(s *projections.State) {
		for _, run := range []string{"T03", "T04", "T05", "T06", "T07"} {
			require.True(t, s.IsCold(run), "%s is cold before it is touched", run)
		}
	})
	steps := []struct {
		actor    events.Actor
		c        Command
		accepted bool // else either answer will do
	}{
		{orchestrator, &RunTransition{RunID: "T03", To: "running"}, true}, // completed → running
		{worker("02_exec"), &TaskUsage{RunID: "T03", TaskID: "02_exec", Input: 7, Turns: 1}, true},
		{orchestrator, &MessageSend{RunID: "T03", To: []string{"03_rev"}, Body: "again"}, true},
		{orchestrator, &RunTransition{RunID: "T03", To: "completed"}, true},
		{admin, &CredentialRevoke{RunID: "T04", TaskID: "02_exec", Reason: "gone"}, true},
		{orchestrator, &MessageSend{RunID: "T05", To: []string{"02_exec"}, Body: "late"}, false},
		{worker("02_exec"), &DelegateRequest{RunID: "T06", TaskID: "02_exec", Prompt: "p"}, false},
		{orchestrator, &RunTransition{RunID: "T07", To: "cancelled"}, false},
	}
	for _, st := range steps {
		if r := f.submitAs(st.actor, st.c); st.accepted {
			require.Nil(t, r.Rejected, "%s", st.c.Kind())
		}
		after()
	}
}

// Every query answers the same for every run, hot or cold, whether the
// state kept ended runs hot (a plain fold from position 1), made them cold
// as they ended (the live engine), was rebuilt from position 1 making them
// cold as it went, or from a snapshot holding cold runs plus a tail that
// touches them.
func TestTieredStateAnswersAsTheFullFold(t *testing.T) {
	fs := vfs.NewMem()
	clock := newTestClock()
	open := func() *engineFixture {
		l, err := eventlog.Open("db", &eventlog.Options{FS: fs})
		require.NoError(t, err)
		e, err := Open(l, Options{Clock: clock.Now, NewID: counterIDs(), ExpiryInterval: -1, SnapshotEvery: -1, Retention: -1})
		require.NoError(t, err)
		f := &engineFixture{t: t, fs: fs, log: l, eng: e, clock: clock}
		t.Cleanup(f.close)
		return f
	}
	check := func(f *engineFixture, what string) {
		t.Helper()
		full := projections.New()
		require.NoError(t, projections.Replay(full, f.log, 0))
		now := clock.Now().UnixMilli()
		want := queryAnswers(t, full, now)
		f.eng.Read(func(s *projections.State) {
			require.Positive(t, s.ColdRuns(), "%s: some runs are cold", what)
			requireSameAnswers(t, want, queryAnswers(t, s, now), what+": live")
		})
		rebuilt, _, err := projections.LoadTiered(f.log, projections.Tiering{NoSnapshot: true, Now: now})
		require.NoError(t, err)
		require.Positive(t, rebuilt.ColdRuns(), "%s: the fold from position 1 made runs cold", what)
		requireSameAnswers(t, want, queryAnswers(t, rebuilt, now), what+": rebuilt from position 1")
		t.Logf("%s: %d answers, %d cold, %d hot, position %d", what, len(want), rebuilt.ColdRuns(), rebuilt.HotRuns(), rebuilt.Position)
	}

	f := open()
	tierWorkload(t, f)
	check(f, "after the workload")
	f.eng.saveSnapshot() // holds cold runs
	touchCold(t, f, func() {})
	check(f, "after touching cold runs")
	f.close()

	f = open()
	info := f.eng.LoadInfo()
	require.NotZero(t, info.SnapshotPosition)
	require.Positive(t, info.Replayed, "the tail touched runs cold in the snapshot")
	check(f, "after a restart from the snapshot and the tail")
}

// The engine crashed at every commit while runs went cold and were touched
// again, with snapshots of cold runs taken in between: each reopened store
// answers as the acknowledged commands left it.
func TestTieredEngineCrashAtEveryCommit(t *testing.T) {
	fs := vfs.NewCrashableMem()
	clock := newTestClock()
	l, err := eventlog.Open("db", &eventlog.Options{FS: fs})
	require.NoError(t, err)
	e, err := Open(l, Options{Clock: clock.Now, NewID: counterIDs(), ExpiryInterval: -1, SnapshotEvery: -1, Retention: -1})
	require.NoError(t, err)
	f := &engineFixture{t: t, fs: fs, log: l, eng: e, clock: clock}
	tierWorkload(t, f)
	e.saveSnapshot()
	type crash struct {
		fs    vfs.FS
		state *projections.State
	}
	var crashes []crash
	capture := func() {
		var st *projections.State
		e.Read(func(s *projections.State) { st = whole(t, s) })
		crashes = append(crashes, crash{fs: fs.CrashClone(vfs.CrashCloneCfg{}), state: st})
	}
	capture()
	// Crash after each command that touches a cold run, with a snapshot
	// after each of the first few.
	touched := 0
	touchCold(t, f, func() {
		touched++
		if touched <= 3 {
			e.saveSnapshot()
		}
		capture()
	})
	require.NoError(t, e.Close())
	require.NoError(t, l.Close())

	for i, c := range crashes {
		l, err := eventlog.Open("db", &eventlog.Options{FS: c.fs})
		require.NoError(t, err, "crash %d", i)
		e, err := Open(l, Options{Clock: clock.Now, NewID: counterIDs(), ExpiryInterval: -1, SnapshotEvery: -1, Retention: -1})
		require.NoError(t, err, "crash %d", i)
		now := clock.Now().UnixMilli()
		e.Read(func(s *projections.State) {
			require.Positive(t, s.ColdRuns(), "crash %d", i)
			require.Equal(t, c.state, whole(t, s), "crash %d", i)
			requireSameAnswers(t, queryAnswers(t, c.state, now), queryAnswers(t, s, now), fmt.Sprintf("crash %d", i))
		})
		require.NoError(t, e.Close())
		require.NoError(t, l.Close())
	}
}

// stateQueries are the methods of *projections.State that answer
// questions; queryAnswers asks each of them. The others change a state or
// say how it is held.
var (
	stateQueries = []string{
		"Account", "AccountHistory", "Allocation", "Ask", "Asks", "Config", "Credential", "Credentials",
		"Delegation", "Delegations", "DelegationsPage", "DueAsks", "InFlight", "IsShadow", "Ledger", "LedgerPage",
		"Mailbox", "Message", "MessagesSince", "RootSpent", "Run", "Runs", "SlotHolder", "SlotWaiters", "Slots",
		"SlotsHeld", "SlotsHeldBy", "SlotsOf", "Task", "Tasks", "TasksPage",
	}
	stateNotQueries = []string{
		"Clone", "ColdRuns", "ColdStore", "EvictAll", "Evict", "Evictable", "FaultIn", "HotRuns", "IsCold",
		"SetColdStore", "ThawFrom", "Warm", "Whole",
	}
)

func TestQueryAnswersAskEveryQuery(t *testing.T) {
	typ := reflect.TypeOf(&projections.State{})
	for i := 0; i < typ.NumMethod(); i++ {
		name := typ.Method(i).Name
		require.True(t, slices.Contains(stateQueries, name) || slices.Contains(stateNotQueries, name),
			"projections.State.%s is new: make queryAnswers ask it, or list it as no query", name)
	}
}

// queryAnswers asks every query of s (stateQueries) about every run, and
// every record of each, paged and whole, plus an unknown run.
func queryAnswers(t *testing.T, s *projections.State, now int64) map[string]any {
	t.Helper()
	out := map[string]any{}
	put := func(k string, v ...any) {
		_, dup := out[k]
		require.False(t, dup, k)
		out[k] = v
	}
	put("Position", s.Position)
	put("Config", s.Config())
	put("Slots", s.Slots())
	put("SlotsHeld", s.SlotsHeld())
	put("InFlight", s.InFlight())
	put("DueAsks", s.DueAsks(now))
	put("DueAsksLater", s.DueAsks(now+int64(time.Hour/time.Millisecond)))
	statusSets := [][]projections.RunStatus{nil, {projections.RunCompleted}, {projections.RunRunning, projections.RunCancelled}}
	for _, newest := range []bool{false, true} {
		for si, st := range statusSets {
			f := projections.RunFilter{Statuses: st, Limit: 3, Newest: newest}
			for p := 0; ; p++ {
				page, err := s.Runs(f)
				require.NoError(t, err)
				put(fmt.Sprintf("Runs/%v/%d/%d", newest, si, p), page)
				if page.NextCursor == "" {
					break
				}
				f.Cursor = page.NextCursor
			}
		}
	}
	all, err := s.Runs(projections.RunFilter{})
	require.NoError(t, err)
	ids := []string{"nope"}
	for _, r := range all.Runs {
		ids = append(ids, r.RunID)
	}
	for _, run := range ids {
		q := func(k string, v ...any) { put(run+"/"+k, v...) }
		r, ok := s.Run(run)
		q("Run", r, ok)
		q("SlotsHeldBy", s.SlotsHeldBy(run))
		q("SlotsOf", s.SlotsOf(run))
		q("SlotWaiters", s.SlotWaiters(run, now, 1e9, 2))
		q("MessagesSince", s.MessagesSince(run, 0, 1000))
		q("RootSpent", s.RootSpent(run))
		tasks := s.Tasks(run)
		q("Tasks", tasks)
		recordPages(t, q, "TasksPage", func(f projections.PageFilter) (string, any, error) {
			p, err := s.TasksPage(run, f)
			return p.NextCursor, p, err
		})
		recipients := []string{events.RunInbox, "nobody"}
		for _, task := range append(tasks, projections.Task{TaskID: "nope"}) {
			id := task.TaskID
			recipients = append(recipients, id)
			tk, ok := s.Task(run, id)
			q("Task/"+id, tk, ok)
			q("IsShadow/"+id, s.IsShadow(run, id))
			a, ok := s.Account(run, id)
			q("Account/"+id, a, ok)
			al, ok := s.Allocation(run, id)
			q("Allocation/"+id, al, ok)
			recordPages(t, q, "AccountHistory/"+id, func(f projections.PageFilter) (string, any, error) {
				h, ok, err := s.AccountHistory(run, id, f)
				return h.NextCursor, []any{h, ok}, err
			})
		}
		dels := s.Delegations(run)
		q("Delegations", dels)
		recordPages(t, q, "DelegationsPage", func(f projections.PageFilter) (string, any, error) {
			p, err := s.DelegationsPage(run, f)
			return p.NextCursor, p, err
		})
		for _, d := range dels {
			dd, ok := s.Delegation(run, d.SubID)
			q("Delegation/"+d.SubID, dd, ok)
			h, ok := s.SlotHolder(d.SubID)
			q("SlotHolder/"+d.SubID, h, ok)
		}
		q("Ledger", s.Ledger(run))
		recordPages(t, q, "LedgerPage", func(f projections.PageFilter) (string, any, error) {
			p, err := s.LedgerPage(run, f)
			return p.NextCursor, p, err
		})
		for _, to := range recipients {
			for _, pending := range []bool{false, true} {
				var msgs []projections.Message
				for p, f := 0, (projections.MailboxFilter{Pending: pending, Limit: 2}); ; p++ {
					page, err := s.Mailbox(run, to, f)
					require.NoError(t, err)
					q(fmt.Sprintf("Mailbox/%s/%v/%d", to, pending, p), page)
					msgs = append(msgs, page.Messages...)
					if page.NextCursor == "" {
						break
					}
					f.Cursor = page.NextCursor
				}
				for _, m := range msgs {
					mm, ok := s.Message(run, m.ID)
					q(fmt.Sprintf("Message/%s/%v/%s", to, pending, m.ID), mm, ok)
				}
			}
		}
		asks := s.Asks(run)
		q("Asks", asks)
		for _, a := range asks {
			aa, ok := s.Ask(run, a.QuestionID)
			q("Ask/"+a.QuestionID, aa, ok)
		}
		creds := s.Credentials(run)
		q("Credentials", creds)
		for _, c := range append(creds, projections.Credential{Key: "nope"}) {
			cc, ok := s.Credential(run, c.Key)
			q("Credential/"+c.Key, cc, ok)
		}
	}
	return out
}

// requireSameAnswers compares two queryAnswers one answer at a time, so a
// difference names its query.
func requireSameAnswers(t *testing.T, want, got map[string]any, what string) {
	t.Helper()
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		require.Equal(t, want[k], got[k], "%s: %s", what, k)
	}
	require.Len(t, got, len(want), what)
}

// recordPages reads every page of size 2 of a paged query.
func recordPages(t *testing.T, q func(string, ...any), name string, read func(projections.PageFilter) (next string, page any, err error)) {
	f := projections.PageFilter{Limit: 2}
	for p := 0; ; p++ {
		next, page, err := read(f)
		require.NoError(t, err)
		q(fmt.Sprintf("%s/%d", name, p), page)
		if next == "" {
			return
		}
		f.Cursor = next
	}
}

// Once enough runs went cold, a snapshot is taken at once, however few
// events passed: it holds them as summaries, so a restart does not decode
// them whole again.
func TestEngineSnapshotsOnceRunsGoCold(t *testing.T) {
	fs := vfs.NewMem()
	clock := newTestClock()
	l, err := eventlog.Open("db", &eventlog.Options{FS: fs})
	require.NoError(t, err)
	defer l.Close()
	e, err := Open(l, Options{Clock: clock.Now, NewID: counterIDs(), ExpiryInterval: -1, SnapshotEvery: 1_000_000, Retention: -1})
	require.NoError(t, err)
	f := &engineFixture{t: t, fs: fs, log: l, eng: e, clock: clock}
	for i := 0; i < snapshotAfterCold; i++ {
		run := fmt.Sprintf("C%02d", i)
		require.Nil(t, f.submitAs(admin, &RunCreate{RunID: run, Team: "t", Goal: "g", Cwd: "/w"}).Rejected)
		require.Nil(t, f.submitAs(orchestrator, &RunTransition{RunID: run, To: "running"}).Rejected)
		require.Nil(t, f.submitAs(orchestrator, &RunTransition{RunID: run, To: "completed"}).Rejected)
	}
	require.NoError(t, e.Close()) // waits for the background snapshot
	snap, err := l.LatestSnapshot()
	require.NoError(t, err)
	s, err := projections.DecodeSnapshot(snap.Data)
	require.NoError(t, err)
	require.Equal(t, snapshotAfterCold, s.ColdRuns())
	require.Zero(t, s.HotRuns())
}

// Within the retention, at most MaxRetainedRuns ended runs stay hot: the
// ones that ended first go cold beyond it, so the memory of ended runs does
// not grow with the rate at which they end.
func TestEngineRetainsAtMostMaxRetainedRuns(t *testing.T) {
	fs := vfs.NewMem()
	clock := newTestClock()
	l, err := eventlog.Open("db", &eventlog.Options{FS: fs})
	require.NoError(t, err)
	defer l.Close()
	e, err := Open(l, Options{Clock: clock.Now, NewID: counterIDs(), ExpiryInterval: -1, SnapshotEvery: -1, Retention: time.Hour})
	require.NoError(t, err)
	defer e.Close()
	f := &engineFixture{t: t, fs: fs, log: l, eng: e, clock: clock}
	const extra = 6
	for i := 0; i < MaxRetainedRuns+extra; i++ {
		run := fmt.Sprintf("C%02d", i)
		require.Nil(t, f.submitAs(admin, &RunCreate{RunID: run, Team: "t", Goal: "g", Cwd: "/w"}).Rejected)
		require.Nil(t, f.submitAs(orchestrator, &RunTransition{RunID: run, To: "running"}).Rejected)
		require.Nil(t, f.submitAs(orchestrator, &RunTransition{RunID: run, To: "completed"}).Rejected)
	}
	e.Read(func(s *projections.State) {
		require.Equal(t, extra, s.ColdRuns())
		for i := 0; i < extra; i++ {
			require.True(t, s.IsCold(fmt.Sprintf("C%02d", i)), "the runs that ended first went cold")
		}
	})
}
