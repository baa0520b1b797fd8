package commands

import (
	"encoding/json"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// A question closes with its asker: a task that leaves waiting for anything but an answer or its deadline (an end in
// any terminal status, a retry, its delegation's settlement) or whose run ends times its question out in the same
// decision, and says so: without a reason the question read as timed out though its deadline had not passed. Left
// pending, the question kept the run's waitState on a task no longer parked on it, kept an ended
// run from going cold (projections' mayEvict) for up to an hour beyond its retention and MaxRetainedRuns, and
// resumed at its deadline a task of a run that had ended an hour before.
func TestAskEndsWithItsAsker(t *testing.T) {
	for _, tc := range []struct {
		name    string
		asker   string
		end     Command
		resumed bool // the task is still parked when the question closes, and resumes as at its deadline
	}{
		{"task completed", "02_exec", &TaskTransition{RunID: fxRun, TaskID: "02_exec", To: "completed"}, false},
		{"task failed", "02_exec", &TaskTransition{RunID: fxRun, TaskID: "02_exec", To: "failed", Error: "e"}, false},
		{"task cancelled", "02_exec", &TaskTransition{RunID: fxRun, TaskID: "02_exec", To: "cancelled"}, false},
		{"task retried", "02_exec", &TaskTransition{RunID: fxRun, TaskID: "02_exec", To: "queued"}, false},
		{"run cancelled", "02_exec", &RunTransition{RunID: fxRun, To: "cancelled"}, true},
		{"run completed", "02_exec", &RunTransition{RunID: fxRun, To: "completed"}, true},
		{"run failed", "02_exec", &RunTransition{RunID: fxRun, To: "failed"}, true},
		{"budget abort", "02_exec", &TaskUsage{RunID: fxRun, TaskID: "02_exec", Input: 1000}, false},
		{"run cancelled, shadow asks", "gc-1", &RunTransition{RunID: fxRun, To: "cancelled"}, true},
		{"budget abort, shadow asks", "gc-1", &TaskUsage{RunID: fxRun, TaskID: "02_exec", Input: 1000}, true},
		{"delegation settled", "gc-1", &DelegateSettle{RunID: fxRun, SubID: "gc-1", Outcome: OutcomeOK,
			Text: "r"}, false},
		{"delegation cancelled", "gc-1", &DelegateSettle{RunID: fxRun, SubID: "gc-1",
			Outcome: OutcomeCancelled}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := fxRunning(t, 100)
			l.delegation("02_exec", "gc-1", 2)
			l.add(events.TypeDelegateSpawned, &events.DelegateSpawned{TaskID: "02_exec", SubID: "gc-1", PID: 1})
			l.run(&WaitRequest{RunID: fxRun, TaskID: tc.asker, Question: "which?"})
			run, _ := l.s.Run(fxRun)
			require.NotNil(t, run.WaitState)
			qid := run.WaitState.QuestionID

			dec := l.run(tc.end)

			a, _ := l.s.Ask(fxRun, qid)
			require.Equal(t, projections.AskTimedOut, a.Status,
				"the question closes in the decision that ends its asker")
			reason := `"reason":"asker-ended"`
			if tc.resumed {
				reason = `"reason":"run-ended"` // the run ended, not the task
			}
			require.Contains(t, string(fxJSON(t, a)), reason, "the ask's query answer says why it closed early")
			closes := slices.IndexFunc(dec.Events, func(ev events.Event) bool {
				return ev.Type == events.TypeAskTimedOut
			})
			require.GreaterOrEqual(t, closes, 0)
			require.Contains(t, string(fxJSON(t, dec.Events[closes].Payload)), reason, "so does its ask.timedout")
			run, _ = l.s.Run(fxRun)
			require.Nil(t, run.WaitState, "the run is no longer parked")
			require.Empty(t, l.s.DueAsks(a.Deadline), "nothing is left for the clock to expire")
			task, _ := l.s.Task(fxRun, tc.asker)
			require.Nil(t, task.Waiting)
			require.Equal(t, tc.resumed, task.Status == projections.TaskRunning, "task is %s", task.Status)
		})
	}
}

func fxJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// A task parked on a question that another task's end does not concern keeps it.
func TestAskOfAnotherTaskOutlivesAnEnd(t *testing.T) {
	l := fxRunning(t, 0).task("03_test", projections.TaskRunning)
	l.run(&WaitRequest{RunID: fxRun, TaskID: "02_exec", Question: "which?"})
	l.run(&WaitRequest{RunID: fxRun, TaskID: "03_test", Question: "and you?"})
	dec := l.run(&TaskTransition{RunID: fxRun, TaskID: "03_test", To: "cancelled"})
	require.Equal(t, []string{events.TypeAskTimedOut, events.TypeTaskCancelled}, fxTypes(dec.Events))

	p, err := l.s.AsksPage(fxRun, true, projections.PageFilter{})
	require.NoError(t, err)
	require.Len(t, p.Items, 1)
	require.Equal(t, "02_exec", p.Items[0].TaskID)
	task, _ := l.s.Task(fxRun, "02_exec")
	require.Equal(t, projections.TaskWaiting, task.Status)
}

// An ended run whose worker was parked when it ended is held to MaxRetainedRuns as any other: its question closed
// with it, so nothing keeps it hot until the deadline.
func TestEngineRetainsARunEndedWithAParkedTaskAtMostAsAnyOther(t *testing.T) {
	f := openColdEngine(t, Options{SnapshotEvery: -1, Retention: time.Hour})
	cfg := projections.DefaultConfig()
	cfg.WaitMethodsEnabled = true
	require.Nil(t, f.submitAs(admin, &Configure{Config: cfg}).Rejected)
	for _, c := range []struct {
		actor events.Actor
		c     Command
	}{
		{admin, &RunCreate{RunID: "P", Team: "t", Goal: "g", Cwd: "/w"}},
		{orchestrator, &RunTransition{RunID: "P", To: "running"}},
		{orchestrator, &TaskCreate{RunID: "P", TaskID: "02_exec", Role: "executor", Agent: "a", Title: "x",
			Cwd: "/w"}},
		{orchestrator, &TaskTransition{RunID: "P", TaskID: "02_exec", To: "running"}},
		{worker("02_exec"), &WaitRequest{RunID: "P", TaskID: "02_exec", Question: "ok?", TimeoutSec: ptr(3600.0)}},
		{orchestrator, &RunTransition{RunID: "P", To: "cancelled"}},
	} {
		require.Nil(t, f.submitAs(c.actor, c.c).Rejected, "%s", c.c.Kind())
	}
	f.eng.Read(func(s *projections.State) {
		require.Empty(t, s.DueAsks(math.MaxInt64),
			"nothing left for the clock")
	})
	endRuns(t, f, "C", MaxRetainedRuns)
	f.eng.Read(func(s *projections.State) { require.True(t, s.IsCold("P"), "the run that ended first went cold") })
}

// A question asked after its run ended would outlive it: the run's end closes only the questions asked before it, and
// the broker's check of a worker against the state it publishes may run before the end is published.
func TestNoQuestionIsAskedOfAnEndedRun(t *testing.T) {
	l := fxRunning(t, 0)
	l.run(&RunTransition{RunID: fxRun, To: "cancelled"})
	_, err := Decide(l.s, &WaitRequest{RunID: fxRun, TaskID: "02_exec", Question: "which?"}, fxEnv())
	var rej *RejectedError
	require.ErrorAs(t, err, &rej)
	require.Equal(t, "run-terminal", rej.Reason)
	p, err := l.s.AsksPage(fxRun, true, projections.PageFilter{})
	require.NoError(t, err)
	require.Empty(t, p.Items)
}

// A question its asker's end closes at or past its deadline has timed out: its ask.timedout names no reason, as
// AskExpire's does from the deadline on, whichever of the two the writer decides first. A millisecond before the
// deadline the end closes it early, and says so (asker-ended).
func TestAskClosedByItsAskersEndFromItsDeadlineOnHasTimedOut(t *testing.T) {
	for _, tc := range []struct {
		name   string
		at     int64 // milliseconds from the deadline
		reason string
	}{
		{"a millisecond before its deadline", -1, events.AskReasonAskerEnded},
		{"at its deadline", 0, ""},
		{"past its deadline", 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := fxRunning(t, 0)
			asked := l.run(&WaitRequest{RunID: fxRun, TaskID: "02_exec", Question: "q", TimeoutSec: fxF(10)})
			res := asked.Result.(WaitResult)
			env := fxEnv()
			env.Now = (res.Deadline + tc.at) * int64(time.Millisecond)
			dec, err := Decide(l.s, &TaskTransition{RunID: fxRun, TaskID: "02_exec", To: "cancelled"}, env)
			require.NoError(t, err)
			fxRequireEvents(t, dec.Events,
				fxE{events.TypeAskTimedOut, &events.AskTimedOut{TaskID: "02_exec", QuestionID: res.QuestionID,
					Reason: tc.reason}},
				fxE{events.TypeTaskCancelled, &events.TaskCancelled{TaskID: "02_exec"}})
		})
	}
}
