package commands

import (
	"context"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// olderEvent is an event of an older log on run "R": its type and payload.
type olderEvent struct {
	typ string
	p   any
}

// writeOlderLog appends evs to a new log in fs, one second apart from clock's reading, as a build wrote them before
// a question closed with its asker (or an import of another runtime's history writes them today).
func writeOlderLog(t *testing.T, fs vfs.FS, clock *testClock, evs ...olderEvent) {
	t.Helper()
	l, err := eventlog.Open("db", &eventlog.Options{FS: fs})
	require.NoError(t, err)
	defer l.Close()
	var w eventlog.Write
	var buf []byte
	for i, e := range evs {
		ev := events.Event{Stream: "R", Type: e.typ, SchemaVersion: events.SchemaVersion(e.typ),
			Time: clock.Now().UnixNano() + int64(i)*int64(time.Second), Payload: e.p}
		var le eventlog.Event
		le, buf, err = toLog(&ev, buf)
		require.NoError(t, err)
		w.Events = append(w.Events, le)
	}
	_, err = l.Append(w)
	require.NoError(t, err)
	clock.Advance(time.Duration(len(evs)) * time.Second)
}

// A question an older log left pending after its asker left it (the task ended, was retried and asked again, its
// delegation settled) or after its run ended held the run's waitState, kept an ended run hot and, for a run that
// ended, kept its task parked, until its deadline, up to an hour later. The engine clock closes it at its next tick,
// as a recorded command of its own; the log folds as it did.
func TestClockClosesTheQuestionsAnOlderLogStranded(t *testing.T) {
	const q1, q2 = "q1", "q2"
	clock := newTestClock()
	ms := clock.Now().UnixMilli()
	deadline := ms + 3_600_000
	asked := func(task, qid string) []olderEvent {
		return []olderEvent{
			{events.TypeTaskWaiting, &events.TaskWaiting{TaskID: task, QuestionID: qid, AskedAt: ms,
				Deadline: deadline}},
			{events.TypeAskRequested, &events.AskRequested{TaskID: task, QuestionID: qid, Question: "which?",
				AskedAt: ms, Deadline: deadline, TimeoutSec: 3600}},
		}
	}
	running := []olderEvent{
		{events.TypeRunCreated, &events.RunCreated{Team: "t", Goal: "g", Cwd: "/w"}},
		{events.TypeRunRunning, &events.RunRunning{}},
		{events.TypeTaskCreated, &events.TaskCreated{TaskID: "02_exec", Role: "executor", Agent: "a", Title: "x",
			Cwd: "/w", DependsOn: []string{}, StepID: "exec", Kind: events.TaskKindWorkflow}},
		{events.TypeTaskStarted, &events.TaskStarted{TaskID: "02_exec"}},
	}
	for _, tc := range []struct {
		name    string
		then    []olderEvent
		closed  []string // the questions the tick closes
		pending string   // the question still pending after it, "" for none
		status  projections.TaskStatus
		reason  string // the reason the closing records
	}{
		{"task completed", []olderEvent{{events.TypeTaskCompleted, &events.TaskCompleted{TaskID: "02_exec"}}},
			[]string{q1}, "", projections.TaskCompleted, "asker-ended"},
		{"task cancelled", []olderEvent{{events.TypeTaskCancelled, &events.TaskCancelled{TaskID: "02_exec"}}},
			[]string{q1}, "", projections.TaskCancelled, "asker-ended"},
		{"task retried and asking again", append([]olderEvent{
			{events.TypeTaskRetried, &events.TaskRetried{TaskID: "02_exec"}},
			{events.TypeTaskStarted, &events.TaskStarted{TaskID: "02_exec"}}}, asked("02_exec", q2)...),
			[]string{q1}, q2, projections.TaskWaiting, "asker-ended"},
		{"run cancelled", []olderEvent{{events.TypeRunCancelled, &events.RunCancelled{}}},
			[]string{q1}, "", projections.TaskRunning, "run-ended"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newTestClock()
			fs := vfs.NewMem()
			evs := append(append(append([]olderEvent(nil), running...), asked("02_exec", q1)...), tc.then...)
			writeOlderLog(t, fs, clock, evs...)
			f := openEngineWith(t, fs, clock, Options{SnapshotEvery: -1})
			now := clock.Now().UnixMilli()
			f.eng.Read(func(s *projections.State) {
				a, _ := s.Ask("R", q1)
				require.Equal(t, projections.AskPending, a.Status, "the older log folds as it did")
				require.NotContains(t, s.Evictable(now, 0, 0), "R", "a pending question keeps the run hot")
			})

			require.Equal(t, len(tc.closed), f.eng.Tick(context.Background()), "closed long before the deadline")
			require.Zero(t, f.eng.Tick(context.Background()), "closed once")

			f.eng.Read(func(s *projections.State) {
				for _, qid := range tc.closed {
					a, _ := s.Ask("R", qid)
					require.Equal(t, projections.AskTimedOut, a.Status)
					require.Contains(t, string(fxJSON(t, a)), `"reason":"`+tc.reason+`"`,
						"closed before its deadline")
				}
				run, _ := s.Run("R")
				if tc.pending == "" {
					require.Nil(t, run.WaitState)
				} else {
					require.Equal(t, tc.pending, run.WaitState.QuestionID, "the question its task waits on stays")
					a, _ := s.Ask("R", tc.pending)
					require.Equal(t, projections.AskPending, a.Status)
				}
				task, _ := s.Task("R", "02_exec")
				require.Equal(t, tc.status, task.Status)
				require.Empty(t, DueExpiries(s, now), "nothing left for the clock before the deadline")
				if status, _ := s.RunStatus("R"); status.Stale() {
					require.Contains(t, s.Evictable(now, 0, 0), "R", "the ended run may go cold")
				}
			})
			o, err := f.log.Outcome(events.EnginePrincipal().Key(), "ask-expire:R:"+q1)
			require.NoError(t, err)
			require.True(t, o.Accepted(), "the engine's own command, recorded")
		})
	}
}

// A closing that named another task than the question's (an ask.timedout of an imported history without its taskId)
// closed the question but left the run's waitState on it (R4 clears it only for the same task and question): the
// run read as parked on a closed question for good, and once ended it never went cold. The clock records the
// closing of the question's own task, which clears it.
func TestClockReleasesAParkItsQuestionOutlived(t *testing.T) {
	clock := newTestClock()
	ms := clock.Now().UnixMilli()
	deadline := ms + 3_600_000
	fs := vfs.NewMem()
	writeOlderLog(t, fs, clock,
		olderEvent{events.TypeRunCreated, &events.RunCreated{Team: "t", Goal: "g", Cwd: "/w"}},
		olderEvent{events.TypeRunRunning, &events.RunRunning{}},
		olderEvent{events.TypeTaskCreated, &events.TaskCreated{TaskID: "02_exec", Role: "executor", Agent: "a",
			Title: "x", Cwd: "/w", DependsOn: []string{}, StepID: "exec", Kind: events.TaskKindWorkflow}},
		olderEvent{events.TypeTaskStarted, &events.TaskStarted{TaskID: "02_exec"}},
		olderEvent{events.TypeTaskWaiting, &events.TaskWaiting{TaskID: "02_exec", QuestionID: "q1", AskedAt: ms,
			Deadline: deadline}},
		olderEvent{events.TypeAskRequested, &events.AskRequested{TaskID: "02_exec", QuestionID: "q1", Question: "?",
			AskedAt: ms, Deadline: deadline, TimeoutSec: 3600}},
		olderEvent{events.TypeAskTimedOut, &events.AskTimedOut{QuestionID: "q1"}},
		olderEvent{events.TypeTaskResumed, &events.TaskResumed{TaskID: "02_exec", QuestionID: "q1"}},
		olderEvent{events.TypeRunCompleted, &events.RunCompleted{}},
	)
	f := openEngineWith(t, fs, clock, Options{SnapshotEvery: -1})
	now := clock.Now().UnixMilli()
	f.eng.Read(func(s *projections.State) {
		run, _ := s.Run("R")
		require.NotNil(t, run.WaitState, "the log folds as it did")
		require.NotContains(t, s.Evictable(deadline+1, 0, 0), "R", "the park keeps the ended run hot, for good")
	})

	require.Equal(t, 1, f.eng.Tick(context.Background()))
	require.Zero(t, f.eng.Tick(context.Background()), "released once")

	f.eng.Read(func(s *projections.State) {
		run, _ := s.Run("R")
		require.Nil(t, run.WaitState)
		require.Contains(t, s.Evictable(now, 0, 0), "R", "the ended run may go cold")
		a, _ := s.Ask("R", "q1")
		require.Equal(t, projections.AskTimedOut, a.Status)
		require.Empty(t, a.Reason, "the question keeps how it closed")
	})
}

// The engine clock's choice names each question once: one stranded before its deadline (its task left waiting) is
// one StrandedAsks gives, and past its deadline DueAsks gives it too; a closed one the run's waitState outlived is
// one StrandedAsks alone gives, before its deadline and after it.
func TestDueExpiriesNamesEachQuestionOnce(t *testing.T) {
	const deadline = 3_600_000
	s := projections.New()
	pos := uint64(0)
	apply := func(run, typ string, p any) {
		pos++
		projections.Apply(s, events.Event{Stream: run, Type: typ, SchemaVersion: events.SchemaVersion(typ),
			Position: pos, Time: 1e6, Payload: p})
	}
	for _, run := range []string{"R", "S"} {
		apply(run, events.TypeRunCreated, &events.RunCreated{Team: "t", Goal: "g", Cwd: "/w"})
		apply(run, events.TypeRunRunning, &events.RunRunning{})
		for _, task := range []string{"t1", "t2"} {
			apply(run, events.TypeTaskCreated, &events.TaskCreated{TaskID: task, Role: "executor", Agent: "a",
				Title: "x", Cwd: "/w", DependsOn: []string{}, StepID: task, Kind: events.TaskKindWorkflow})
			apply(run, events.TypeTaskStarted, &events.TaskStarted{TaskID: task})
		}
	}
	ask := func(run, task, qid string) {
		apply(run, events.TypeTaskWaiting, &events.TaskWaiting{TaskID: task, QuestionID: qid, AskedAt: 1,
			Deadline: deadline})
		apply(run, events.TypeAskRequested, &events.AskRequested{TaskID: task, QuestionID: qid, Question: "?",
			AskedAt: 1, Deadline: deadline, TimeoutSec: 3600})
	}
	ask("R", "t1", "stranded")
	apply("R", events.TypeTaskCompleted, &events.TaskCompleted{TaskID: "t1"})
	ask("R", "t2", "parked")
	ask("S", "t1", "outlived")
	apply("S", events.TypeAskTimedOut, &events.AskTimedOut{QuestionID: "outlived"}) // R4: another task's closing

	expiries := func(now int64) []string {
		var out []string
		for _, c := range DueExpiries(s, now) {
			a, ok := c.(*AskExpire)
			require.True(t, ok, "%T", c)
			out = append(out, a.RunID+"/"+a.QuestionID)
		}
		return out
	}
	require.Equal(t, []string{"R/stranded", "S/outlived"}, expiries(deadline-1), "before the deadline")
	require.Equal(t, []string{"R/stranded", "R/parked", "S/outlived"}, expiries(deadline), "at the deadline")
}
