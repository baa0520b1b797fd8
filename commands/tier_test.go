package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
	"github.com/crewlog/crewlog/projections/projectionstest"
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
		must(admin, &RunCreate{RunID: run, Team: "t", Goal: "g", Cwd: "/w",
			BudgetTotal: optBudget(int64(100000 * (i % 3)))})
		must(orchestrator, &RunTransition{RunID: run, To: "running"})
		must(orchestrator, &TaskCreate{RunID: run, TaskID: "02_exec", Role: "executor", Agent: "a", Title: "x",
			Cwd: "/w", StepID: "s"})
		must(orchestrator, &TaskCreate{RunID: run, TaskID: "03_rev", Role: "reviewer", Agent: "a", Title: "y",
			Cwd: "/w", StepID: "r"})
		must(orchestrator, &TaskTransition{RunID: run, TaskID: "02_exec", To: "running"})
		must(admin, &CredentialIssue{RunID: run, TaskID: "02_exec", Digest: fmt.Sprintf("%064x", i)})
		must(worker("02_exec"), &TaskUsage{RunID: run, TaskID: "02_exec", Input: int64(100 * i),
			Output: 10, Turns: 1})
		must(orchestrator, &MessageSend{RunID: run, To: []string{"02_exec"}, Body: "start " + run})
		must(worker("02_exec"), &MessageSend{RunID: run, FromTask: "02_exec", To: []string{"03_rev"}, Body: "look"})
		var q WaitResult
		require.NoError(t, json.Unmarshal(must(worker("02_exec"),
			&WaitRequest{RunID: run, TaskID: "02_exec", Question: "ok?", TimeoutSec: ptr(60.0)}).Result, &q))
		if i%2 == 0 {
			must(orchestrator, &WaitResolve{RunID: run, TaskID: "02_exec", QuestionID: q.QuestionID})
		}
		// T00 takes two slots and keeps them, T02 one that it still holds
		// when it ends; every other run gets the last, and is refused
		// another (and waits).
		for k := 0; k < 2; k++ {
			submit(worker("02_exec"), &DelegateRequest{RunID: run, TaskID: "02_exec", Prompt: "p",
				BudgetTokens: ptr(int64(500))})
		}
		var mine []projections.Delegation
		f.eng.Read(func(s *projections.State) { mine = s.Delegations(run) })
		for _, d := range mine {
			if run != "T00" && run != "T02" && !d.Status.Terminal() {
				must(orchestrator, &DelegateSpawned{RunID: run, SubID: d.SubID, PID: 100 + i})
				must(orchestrator, &DelegateSettle{RunID: run, SubID: d.SubID, Outcome: OutcomeOK, Text: "done",
					UsageTokens: ptr(int64(700))})
			}
		}
		var box projections.MailboxPage
		f.eng.Read(func(s *projections.State) { box, _ = s.Mailbox(run, "02_exec", projections.MailboxFilter{}) })
		if len(box.Messages) > 0 && i%3 == 1 {
			must(orchestrator, &MailboxAck{RunID: run, Recipient: "02_exec",
				MessageIDs: []string{box.Messages[0].ID}})
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
// message, a refused delegation, a repeated end, a late delivery and
// acknowledgement of a message and a late spawn of a delegation the run does
// not hold.
func touchCold(t *testing.T, f *engineFixture, after func()) {
	var pending []string
	f.eng.Read(func(s *projections.State) {
		for _, run := range []string{"T03", "T04", "T05", "T06", "T07", "T08"} {
			require.True(t, s.IsCold(run), "%s is cold before it is touched", run)
		}
		box, err := s.Mailbox("T05", "02_exec", projections.MailboxFilter{Pending: true})
		require.NoError(t, err)
		for _, m := range box.Messages {
			pending = append(pending, m.ID)
		}
	})
	require.NotEmpty(t, pending, "T05 has a message pending")
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
		{orchestrator, &MailboxDeliver{RunID: "T05", Recipient: "02_exec", MessageIDs: pending}, true},
		{orchestrator, &MailboxAck{RunID: "T05", Recipient: "02_exec", MessageIDs: pending}, true},
		{orchestrator, &DelegateSpawned{RunID: "T08", SubID: "d-late", PID: 7}, false},
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
		e, err := Open(l, Options{Clock: clock.Now, NewID: counterIDs(), ExpiryInterval: -1, SnapshotEvery: -1,
			Retention: -1})
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
		want := projectionstest.Answers(t, full, now)
		f.eng.Read(func(s *projections.State) {
			require.Positive(t, s.ColdRuns(), "%s: some runs are cold", what)
			require.Zero(t, s.ColdInMemory(), "%s: their summaries are in the index", what)
			projectionstest.RequireSame(t, want, projectionstest.Answers(t, s, now), what+": live")
		})
		rebuilt, _, err := projections.LoadTiered(f.log,
			projections.Tiering{NoSnapshot: true, Now: now, RefoldOnly: true})
		require.NoError(t, err)
		require.Positive(t, rebuilt.ColdRuns(), "%s: the fold from position 1 made runs cold", what)
		projectionstest.RequireSame(t, want, projectionstest.Answers(t, rebuilt, now),
			what+": rebuilt from position 1")
		// The same rebuild writing the index of cold runs' summaries, as
		// the engine's does: the runs list pages it.
		indexed, _, err := projections.LoadTiered(f.log,
			projections.Tiering{NoSnapshot: true, Now: now, SaveViews: true, Index: true})
		require.NoError(t, err)
		require.Positive(t, indexed.ColdRuns(), what)
		projectionstest.RequireSame(t, want, projectionstest.Answers(t, indexed, now),
			what+": rebuilt from position 1, index written")
		// Every cold run read back from the view the engine wrote when it
		// went cold (or when it was last re-folded), none re-folded.
		views := f.viewsWritten()
		views.SetColdStore(projections.NewColdStore(f.log, 0))
		projectionstest.RequireSame(t, want, projectionstest.Answers(t, views, now),
			what+": cold runs read from their views")
		store := views.ColdStore()
		require.Positive(t, store.ViewReads(), "%s: views were read", what)
		require.Equal(t, store.Refolds(), store.ViewReads(), "%s: no cold run was re-folded", what)
		t.Logf("%s: %d answers, %d cold, %d hot, position %d", what, len(want), rebuilt.ColdRuns(), rebuilt.HotRuns(),
			rebuilt.Position)
	}

	f := open()
	tierWorkload(t, f)
	check(f, "after the workload")
	f.eng.saveSnapshot() // holds cold runs
	touched := 0
	touchCold(t, f, func() {
		touched++
		check(f, fmt.Sprintf("after touching cold runs %d times", touched))
	})
	f.close()

	f = open()
	info := f.eng.LoadInfo()
	require.NotZero(t, info.SnapshotPosition)
	require.Positive(t, info.Replayed, "the tail touched runs cold in the snapshot")
	check(f, "after a restart from the snapshot and the tail")
}

// viewsWritten waits for the views of cold runs being written, writes those
// still queued, and returns a copy of the published state.
func (f *engineFixture) viewsWritten() *projections.State {
	f.t.Helper()
	f.eng.viewsMu.Lock()
	_, err := f.eng.cold.SaveViews()
	f.eng.viewsMu.Unlock()
	require.NoError(f.t, err)
	var c *projections.State
	f.eng.Read(func(s *projections.State) { c = s.Clone() })
	return c
}

// The engine crashed at every commit while runs went cold and were touched
// again, with snapshots of cold runs taken in between: each reopened store
// answers as the acknowledged commands left it.
func TestTieredEngineCrashAtEveryCommit(t *testing.T) {
	fs := vfs.NewCrashableMem()
	clock := newTestClock()
	l, err := eventlog.Open("db", &eventlog.Options{FS: fs})
	require.NoError(t, err)
	e, err := Open(l, Options{Clock: clock.Now, NewID: counterIDs(), ExpiryInterval: -1, SnapshotEvery: -1,
		Retention: -1})
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
		e, err := Open(l, Options{Clock: clock.Now, NewID: counterIDs(), ExpiryInterval: -1, SnapshotEvery: -1,
			Retention: -1})
		require.NoError(t, err, "crash %d", i)
		now := clock.Now().UnixMilli()
		e.Read(func(s *projections.State) {
			require.Positive(t, s.ColdRuns(), "crash %d", i)
			require.Equal(t, c.state, whole(t, s), "crash %d", i)
			projectionstest.RequireSame(t, projectionstest.Answers(t, c.state, now),
				projectionstest.Answers(t, s, now), fmt.Sprintf("crash %d", i))
		})
		require.NoError(t, e.Close())
		require.NoError(t, l.Close())
	}
}

func TestTierAnswersAskEveryQuery(t *testing.T) { projectionstest.RequireEveryQueryAsked(t) }

// Once enough runs went cold, a snapshot is taken at once, however few
// events passed: it holds them as summaries, so a restart does not decode
// them whole again.
func TestEngineSnapshotsOnceRunsGoCold(t *testing.T) {
	f := openColdEngine(t, Options{SnapshotEvery: 1_000_000, Retention: -1})
	endRuns(t, f, "C", snapshotAfterCold)
	require.NoError(t, f.eng.Close()) // waits for the background snapshot
	snap, err := f.log.LatestSnapshot()
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
	f := openColdEngine(t, Options{SnapshotEvery: -1, Retention: time.Hour})
	const extra = 6
	endRuns(t, f, "C", MaxRetainedRuns+extra)
	f.eng.Read(func(s *projections.State) {
		require.Equal(t, extra, s.ColdRuns())
		for i := 0; i < extra; i++ {
			require.True(t, s.IsCold(fmt.Sprintf("C%02d", i)), "the runs that ended first went cold")
		}
	})
}

// snapshotSignal is an Observer that signals each snapshot saved.
type snapshotSignal chan uint64

func (s snapshotSignal) Committed(*GroupReport) {}
func (s snapshotSignal) Snapshotted(pos uint64, _ int, _ time.Time) {
	select {
	case s <- pos:
	default:
	}
}

// A store whose cold runs have no view (here written with views off, then
// rebuilt from position 1: more runs go cold at once than the queue of
// views holds, as after a change of the snapshot format) gets every view
// written in the background after Open, then a snapshot that says so, so
// the first query of any cold run reads a view and a restart has nothing
// left to write.
func TestEngineWritesTheMissingViewsOfColdRuns(t *testing.T) {
	fs := vfs.NewMem()
	clock := newTestClock()
	l, err := eventlog.Open("db", &eventlog.Options{FS: fs})
	require.NoError(t, err)
	defer l.Close()
	e, err := Open(l, Options{Clock: clock.Now, NewID: counterIDs(), ExpiryInterval: -1, SnapshotEvery: -1,
		Retention: -1, NoViews: true})
	require.NoError(t, err)
	runs := endMoreRunsThanViewsQueue(t, e, clock)
	require.NoError(t, e.Close())
	_, _, err = l.View("C0000")
	require.ErrorIs(t, err, eventlog.ErrNotFound, "views off: no view written")

	snapped := make(snapshotSignal, 1)
	e, err = Open(l, Options{Clock: clock.Now, NewID: counterIDs(), ExpiryInterval: -1, SnapshotEvery: 1 << 30,
		Retention: -1, Observer: snapped})
	require.NoError(t, err)
	cold := e.LoadInfo().Evicted
	require.Greater(t, cold, 1024, "more runs went cold in the fold than the queue of views holds")
	select {
	case <-snapped:
	case <-time.After(time.Minute):
		t.Fatal("no snapshot after the missing views were written")
	}
	require.Zero(t, e.cold.ViewsMissing())
	views := (&engineFixture{t: t, fs: fs, log: l, eng: e, clock: clock}).viewsWritten()
	views.SetColdStore(projections.NewColdStore(l, 0))
	whole, err := views.Whole()
	require.NoError(t, err)
	require.Len(t, whole.InFlight(), 0)
	require.Equal(t, cold, views.ColdRuns())
	require.EqualValues(t, cold, views.ColdStore().ViewReads(), "every cold run read from its view")
	require.Equal(t, views.ColdStore().Refolds(), views.ColdStore().ViewReads(), "none re-folded")
	require.NoError(t, e.Close())

	s, info, err := projections.LoadTiered(l, projections.Tiering{Now: clock.Now().UnixMilli(), SaveViews: true,
		Index: true})
	require.NoError(t, err)
	require.NoError(t, info.SnapshotError)
	require.Equal(t, runs, s.ColdRuns(), "the run the engine kept hot goes cold at Now, queued for its view")
	require.Zero(t, s.ColdStore().ViewsMissing(), "the snapshot after the pass records no missing view")
}

// endMoreRunsThanViewsQueue creates and ends, on e, more runs than projections' queue of views holds (1,024), two
// seconds of clock apart, and returns how many.
func endMoreRunsThanViewsQueue(t *testing.T, e *Engine, clock *testClock) int {
	t.Helper()
	const runs = 1030
	for i := range runs {
		run := fmt.Sprintf("C%04d", i)
		rs, err := e.SubmitAll(context.Background(), []Request{
			{Actor: admin, Command: &RunCreate{RunID: run, Team: "t", Goal: "g", Cwd: "/w"}},
			{Actor: orchestrator, Command: &RunTransition{RunID: run, To: "running"}},
			{Actor: orchestrator, Command: &RunTransition{RunID: run, To: "completed"}},
		})
		require.NoError(t, err)
		for _, r := range rs {
			require.Nil(t, r.Rejected)
		}
		clock.Advance(2 * time.Second) // the fold makes a run cold a second of event time after it ended
	}
	return runs
}

// openColdEngine opens an engine with o on a new store in memory, on a test
// clock, with counted ids and no expiries.
func openColdEngine(t *testing.T, o Options) *engineFixture {
	t.Helper()
	return openEngineWith(t, vfs.NewMem(), newTestClock(), o)
}

// endRuns creates n runs named prefix+i and ends them; with no retention
// they go cold.
func endRuns(t *testing.T, f *engineFixture, prefix string, n int) {
	for i := 0; i < n; i++ {
		run := fmt.Sprintf("%s%02d", prefix, i)
		require.Nil(t, f.submitAs(admin, &RunCreate{RunID: run, Team: "t", Goal: "g", Cwd: "/w"}).Rejected)
		require.Nil(t, f.submitAs(orchestrator, &RunTransition{RunID: run, To: "running"}).Rejected)
		require.Nil(t, f.submitAs(orchestrator, &RunTransition{RunID: run, To: "completed"}).Rejected)
	}
}

// runsPages is every page of the runs list the engine answers (query.runs),
// newest first and not, two runs a page.
func runsPages(t *testing.T, e *Engine) []projections.RunPage {
	var pages []projections.RunPage
	for _, newest := range []bool{false, true} {
		cursor := ""
		for {
			var p projections.RunPage
			var err error
			e.Read(func(s *projections.State) {
				p, err = s.Runs(projections.RunFilter{Limit: 2, Newest: newest, Cursor: cursor})
			})
			require.NoError(t, err)
			pages = append(pages, p)
			if p.NextCursor == "" {
				break
			}
			cursor = p.NextCursor
		}
	}
	return pages
}

// A store whose index of finished runs' summaries was deleted by hand,
// its snapshot left: the engine notices at Open, rebuilds the index from
// the log, and the runs list answers as before.
func TestEngineRebuildsARemovedIndexOfSummaries(t *testing.T) {
	fs := vfs.NewMem()
	clock := newTestClock()
	open := func() *engineFixture {
		l, err := eventlog.Open("db", &eventlog.Options{FS: fs})
		require.NoError(t, err)
		e, err := Open(l, Options{Clock: clock.Now, NewID: counterIDs(), ExpiryInterval: -1, SnapshotEvery: 1_000_000,
			Retention: -1})
		require.NoError(t, err)
		return &engineFixture{t: t, fs: fs, log: l, eng: e, clock: clock}
	}
	f := open()
	endRuns(t, f, "C", snapshotAfterCold) // a snapshot is due once they are cold
	f.seedRun("H", 0)
	before := runsPages(t, f.eng)
	f.close() // waits for the background snapshot
	snap, err := func() (eventlog.Snapshot, error) {
		l, err := eventlog.Open("db", &eventlog.Options{FS: fs})
		require.NoError(t, err)
		defer l.Close()
		n, err := l.SummaryStreams()
		require.NoError(t, err)
		require.EqualValues(t, snapshotAfterCold, n)
		require.NoError(t, l.DropSummaries(false)) // what a hand deletion of the 'u' and 'w' keys leaves
		return l.LatestSnapshot()
	}()
	require.NoError(t, err)
	require.Positive(t, snap.Position, "the snapshot relies on the index")

	f = open()
	defer f.close()
	require.Equal(t, before, runsPages(t, f.eng), "query.runs answers as before")
	require.ErrorIs(t, f.eng.LoadInfo().IndexRebuilt, projections.ErrIndexWanting)
	f.eng.Read(func(s *projections.State) {
		require.Equal(t, snapshotAfterCold, s.ColdRuns())
		require.Zero(t, s.ColdInMemory())
	})
}

// NoViews turns off the views of cold runs only: the summaries of the runs
// that go cold still go to the index, so the memory of a daemon without
// views does not grow with the runs that ended. NoViews exists to compare
// reading cold runs from their views with re-folding them; the index is
// what the runs list of every finished run is paged from, and keeping it
// in memory instead would change what the comparison measures.
func TestNoViewsStillWritesTheIndexOfSummaries(t *testing.T) {
	fs := vfs.NewMem()
	clock := newTestClock()
	l, err := eventlog.Open("db", &eventlog.Options{FS: fs})
	require.NoError(t, err)
	e, err := Open(l, Options{Clock: clock.Now, NewID: counterIDs(), ExpiryInterval: -1, SnapshotEvery: -1,
		Retention: -1, NoViews: true})
	require.NoError(t, err)
	f := &engineFixture{t: t, fs: fs, log: l, eng: e, clock: clock}
	defer f.close()
	endRuns(t, f, "C", 5)
	f.seedRun("H", 0) // a group after the last end: the eviction pass has run
	e.Read(func(s *projections.State) {
		require.Equal(t, 5, s.ColdRuns())
		require.Zero(t, s.ColdInMemory(), "no summary kept in memory")
	})
	n, err := l.SummaryStreams()
	require.NoError(t, err)
	require.EqualValues(t, 5, n)
	_, _, err = l.View("C00")
	require.ErrorIs(t, err, eventlog.ErrNotFound, "no view written")
}

// A command that names a cold run reads the run back and makes it hot, and the next eviction pass makes it cold
// again. When the command wrote nothing to the run (refused, or a no-op), the run is what its view and summary
// already say: going cold again does not write its view again, nor count towards the next snapshot, so a client
// sending such commands to a finished run of its own does not make the daemon encode and write the whole run, or
// take a snapshot, again and again.
func TestAColdRunReadBackAndLeftUnchangedIsNotWrittenAgain(t *testing.T) {
	snapped := make(snapshotSignal, 1)
	f := openColdEngine(t, Options{SnapshotEvery: 1 << 30, Retention: -1, Observer: snapped})
	e := f.eng
	endRuns(t, f, "C", 2)
	f.viewsWritten()
	saved := e.cold.ViewsSaved()

	for i := range snapshotAfterCold + 1 {
		e.Read(func(s *projections.State) { require.True(t, s.IsCold("C00")) })
		r := f.submitAs(orchestrator, &DelegateSettle{RunID: "C00", SubID: "gc-none", Outcome: OutcomeOK,
			Text: "late"})
		require.NotNil(t, r.Rejected, "a settlement of no delegation is refused")
		// The next group's eviction pass makes the run cold again.
		next := &RunCreate{RunID: fmt.Sprintf("N%02d", i), Team: "t", Goal: "g", Cwd: "/w"}
		require.Nil(t, f.submitAs(admin, next).Rejected)
	}
	f.viewsWritten()
	require.Equal(t, saved, e.cold.ViewsSaved(), "the unchanged run's view was written again")

	// A command that writes to the run changes it: its view is written again when it goes cold.
	require.Nil(t, f.submitAs(orchestrator, &RunTransition{RunID: "C00", To: "running"}).Rejected)
	require.Nil(t, f.submitAs(orchestrator, &RunTransition{RunID: "C00", To: "completed"}).Rejected)
	require.Nil(t, f.submitAs(admin, &RunCreate{RunID: "N", Team: "t", Goal: "g", Cwd: "/w"}).Rejected)
	f.viewsWritten()
	e.Read(func(s *projections.State) { require.True(t, s.IsCold("C00")) })
	require.Equal(t, saved+1, e.cold.ViewsSaved())

	f.close() // waits for a snapshot in the background, and takes one that is due
	require.Zero(t, len(snapped), "runs read back unchanged made a snapshot due")
}

// liveAndEndRun makes run id live through what a run holds — tasks, a worker's credential, usage, messages, a
// question left pending, a delegation settled and one left in flight — and end, which closes the question; the
// delegation in flight is settled last, giving back its slot.
func liveAndEndRun(t *testing.T, f *engineFixture, id string) {
	t.Helper()
	must := func(actor events.Actor, c Command) Reply {
		t.Helper()
		r := f.submitAs(actor, c)
		require.Nil(t, r.Rejected, "%s", c.Kind())
		return r
	}
	must(admin, &RunCreate{RunID: id, Team: "t", Goal: "g", Cwd: "/w", BudgetTotal: optBudget(100000)})
	must(orchestrator, &RunTransition{RunID: id, To: "running"})
	must(orchestrator, &TaskCreate{RunID: id, TaskID: "02_exec", Role: "executor", Agent: "a", Title: "x", Cwd: "/w",
		StepID: "s"})
	must(orchestrator, &TaskTransition{RunID: id, TaskID: "02_exec", To: "running"})
	must(admin, &CredentialIssue{RunID: id, TaskID: "02_exec", Digest: fmt.Sprintf("%064x", len(id))})
	must(worker("02_exec"), &TaskUsage{RunID: id, TaskID: "02_exec", Input: 100, Output: 10, Turns: 1})
	must(orchestrator, &MessageSend{RunID: id, To: []string{"02_exec"}, Body: "start " + id})
	must(worker("02_exec"), &MessageSend{RunID: id, FromTask: "02_exec", To: []string{"02_exec"}, Body: "note"})
	for range 2 {
		must(worker("02_exec"), &DelegateRequest{RunID: id, TaskID: "02_exec", Prompt: "p",
			BudgetTokens: ptr(int64(500))})
	}
	var dels []projections.Delegation
	f.eng.Read(func(s *projections.State) { dels = s.Delegations(id) })
	require.Len(t, dels, 2)
	must(orchestrator, &DelegateSpawned{RunID: id, SubID: dels[0].SubID, PID: 100})
	must(orchestrator, &DelegateSettle{RunID: id, SubID: dels[0].SubID, Outcome: OutcomeOK, Text: "done",
		UsageTokens: ptr(int64(70))})
	var q WaitResult
	require.NoError(t, json.Unmarshal(must(worker("02_exec"),
		&WaitRequest{RunID: id, TaskID: "02_exec", Question: "ok?", TimeoutSec: ptr(600.0)}).Result, &q))
	must(orchestrator, &RunTransition{RunID: id, To: "completed"})
	must(orchestrator, &DelegateSettle{RunID: id, SubID: dels[1].SubID, Outcome: OutcomeOK, Text: "late",
		UsageTokens: ptr(int64(70))})
}

// The snapshot holds the hot runs whole and nothing of a cold run but what the index cannot give (none, once its
// summary is written): after N runs lived, ended and went cold, its records and bytes, and so the work of a start
// from it, are the same for a few runs as for many more.
func TestSnapshotDoesNotGrowWithColdRuns(t *testing.T) {
	type size struct {
		records int64
		bytes   int
		cold    int
	}
	measure := func(n int) size {
		f := openColdEngine(t, Options{SnapshotEvery: -1, Retention: -1})
		liveAndEndRun(t, f, "hot")
		require.Nil(t, f.submitAs(orchestrator, &RunTransition{RunID: "hot", To: "running"}).Rejected)
		for i := range n {
			liveAndEndRun(t, f, fmt.Sprintf("R%03d", i))
		}
		// One more group after the last end: its eviction pass makes the last run cold.
		require.Nil(t, f.submitAs(orchestrator, &TaskUsage{RunID: "hot", TaskID: "02_exec", Input: 1,
			Turns: 1}).Rejected)
		s := f.viewsWritten()
		b, err := projections.EncodeSnapshot(s)
		require.NoError(t, err)
		return size{records: s.SnapshotRecords(), bytes: len(b), cold: s.ColdRuns()}
	}
	few, many := measure(2), measure(40)
	require.Equal(t, 2, few.cold)
	require.Equal(t, 40, many.cold)
	require.Equal(t, few.records, many.records, "the snapshot's records grow with the cold runs")
	// NB: the position and the count of runs are varints: a few bytes more, never a few per run.
	require.InDelta(t, few.bytes, many.bytes, 8, "the snapshot's bytes grow with the cold runs")
}

// An ended run goes cold however it was refused a slot: a refusal recorded after the run's end (an import, whose
// events pi-crew's files order as they were written) left the run among the slot waiters, which only the run's next
// admission or end cleared, so the run stayed hot for good, whole in memory and in every snapshot, and a file naming
// many runs kept any number of them hot. An ended run waits for no slot (SlotWaiters counts none), so the place held
// nothing; reopened, the run waits again as the full fold has it.
func TestAnEndedRunRefusedASlotGoesCold(t *testing.T) {
	f := openColdEngine(t, Options{SnapshotEvery: -1, Retention: -1})
	const runs = 5
	imp := func(run, what string, typ string, payload any) {
		t.Helper()
		req := importOf(run, "import:"+run+":"+what, typ, payload)
		req.Command.(*Import).Events[0].TimeMs = 0 // the engine clock's: a refusal the queries count as recent
		r, err := f.eng.Submit(context.Background(), req)
		require.NoError(t, err)
		require.Nil(t, r.Rejected, what)
	}
	for i := range runs {
		run := fmt.Sprintf("I%02d", i)
		imp(run, "run", events.TypeRunCreated, &events.RunCreated{Team: "t", Goal: "g", Cwd: "/w"})
		imp(run, "task", events.TypeTaskCreated, &events.TaskCreated{TaskID: "T", Role: "executor", StepID: "s",
			Kind: events.TaskKindWorkflow})
		imp(run, "end", events.TypeRunCompleted, &events.RunCompleted{})
		imp(run, "refused", events.TypeDelegateRejected, &events.DelegateRejected{TaskID: "T", SubID: "s1",
			Reason: events.ReasonSlotsExhausted})
	}
	require.Nil(t, f.submitAs(admin, &RunCreate{RunID: "N", Team: "t", Goal: "g", Cwd: "/w"}).Rejected)
	f.eng.Read(func(s *projections.State) {
		for i := range runs {
			require.True(t, s.IsCold(fmt.Sprintf("I%02d", i)), "run %d: an ended run refused a slot stays hot", i)
		}
	})

	require.Nil(t, f.submitAs(orchestrator, &RunTransition{RunID: "I00", To: "running"}).Rejected)
	full := projections.New()
	require.NoError(t, projections.Replay(full, f.log, 0))
	now := f.clock.Now().UnixMilli()
	require.Equal(t, 1, full.SlotWaiters("", now, 1e9, 2), "the reopened run waits for a slot in the full fold")
	want := projectionstest.Answers(t, full, now)
	f.eng.Read(func(s *projections.State) {
		projectionstest.RequireSame(t, want, projectionstest.Answers(t, s, now), "cold, then reopened")
	})
}

// openMissingViews opens an engine, with hooks, on a store whose cold runs have no view (written with views off,
// then rebuilt from position 1: more runs go cold at once than the queue of views holds), its reads given to faults
// and a block cache too small to keep a block, so the background pass of the missing views reads the tables.
func openMissingViews(t *testing.T, faults errorfs.Injector, hooks *testHooks) *engineFixture {
	t.Helper()
	mem, clock := vfs.NewMem(), newTestClock()
	f := openEngineWith(t, mem, clock, Options{SnapshotEvery: -1, Retention: -1, NoViews: true})
	endMoreRunsThanViewsQueue(t, f.eng, clock)
	f.close()

	l, err := eventlog.Open("db", &eventlog.Options{FS: errorfs.Wrap(mem, faults), CacheSize: 1,
		MemTableSize: 1 << 12})
	require.NoError(t, err)
	o := Options{Clock: clock.Now, NewID: counterIDs(), ExpiryInterval: -1, SnapshotEvery: -1, Retention: -1,
		hooks: hooks}
	e, err := Open(l, o)
	require.NoError(t, err)
	f = &engineFixture{t: t, fs: mem, log: l, eng: e, clock: clock}
	t.Cleanup(f.close)
	return f
}

// A pass of the missing views of cold runs that fails (here every read of a table fails while it runs) is tried
// again once missingViewsRetry eviction passes went by, and writes them all then, where the first error stopped the
// passes until the next restart and left every such run to be re-folded by its first query; before that, no pass
// starts at each eviction pass, which would re-fold a run a second for as long as the error lasts. NB: the passes are
// counted as the writer decides them (missingViewsDecided), one eviction pass a command, so a pass decided too early
// is seen however late its goroutine starts it.
func TestAFailedPassOfTheMissingViewsIsTriedAgainLater(t *testing.T) {
	eio := eioToggle()
	var passes, due, decided, evictions atomic.Int32
	hooks := &testHooks{missingViews: func() {
		if passes.Add(1) == 1 {
			eio.On() // the error lasts for the pass only
		}
	}, missingViewsDecided: func(isDue, starts bool) {
		evictions.Add(1)
		if isDue {
			due.Add(1)
		}
		if starts {
			decided.Add(1)
		}
	}}
	f := openMissingViews(t, eio, hooks)
	passDone := func(n int32) bool { return passes.Load() == n && !f.eng.savingViews.Load() }
	require.Eventually(t, func() bool { return passDone(1) }, time.Minute, time.Millisecond, "the pass at Open")
	eio.Off()
	require.Positive(t, f.eng.cold.ViewsMissing(), "the first pass failed")
	require.EqualValues(t, 1, decided.Load(), "the pass at Open")

	before := evictions.Load()
	for i := range missingViewsRetry { // an eviction pass each: no retention, a second of the clock apart
		require.Nil(t, f.submitAs(admin, &RunCreate{RunID: fmt.Sprintf("N%02d", i), Team: "t", Goal: "g",
			Cwd: "/w"}).Rejected)
	}
	require.EqualValues(t, missingViewsRetry, evictions.Load()-before, "an eviction pass each")
	require.EqualValues(t, 1, due.Load(),
		"a pass of the missing views was due before missingViewsRetry eviction passes went by")

	// NB: a pass writing the views queued meanwhile (runs gone cold at these eviction passes) may still run: the pass
	// of the missing views, due, would start at the first eviction pass after it.
	require.Eventually(t, func() bool { return !f.eng.savingViews.Load() }, time.Minute, time.Millisecond)
	require.EqualValues(t, 1, decided.Load())
	require.Nil(t, f.submitAs(admin, &RunCreate{RunID: "M", Team: "t", Goal: "g", Cwd: "/w"}).Rejected)
	require.EqualValues(t, 2, due.Load(), "no pass due after the wait")
	require.EqualValues(t, 2, decided.Load(), "no pass after the wait")
	require.Eventually(t, func() bool { return passDone(2) }, time.Minute, time.Millisecond,
		"the pass after the wait")
	require.Zero(t, f.eng.cold.ViewsMissing(), "the second pass wrote every missing view")
}

// Each failed pass of the missing views in a row doubles the eviction passes that go by before the next, up to
// maxMissingViewsRetry.
func TestTheWaitAfterFailedPassesOfTheMissingViewsDoublesAndIsBounded(t *testing.T) {
	e := &Engine{}
	require.True(t, e.missingViewsTurn(), "none failed")
	var waits []int64
	for range 8 {
		w := e.putOffMissingViews()
		waits = append(waits, w)
		for range w {
			require.False(t, e.missingViewsTurn(), "a turn within a wait of %d passes", w)
		}
		require.True(t, e.missingViewsTurn(), "no turn after a wait of %d passes", w)
	}
	require.Equal(t, []int64{missingViewsRetry, 2 * missingViewsRetry, 4 * missingViewsRetry, 8 * missingViewsRetry,
		16 * missingViewsRetry, 32 * missingViewsRetry, maxMissingViewsRetry, maxMissingViewsRetry}, waits)
}
