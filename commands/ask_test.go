package commands

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

func fxF(f float64) *float64 { return &f }

// GS-17: park on a question, a wrong resolve changes nothing, the right one
// resumes.
func TestAskParkAndResolve(t *testing.T) {
	l := fxRunning(t, 0)
	ms := fxNow / 1e6
	dec, err := fxDecide(t, l.s, &WaitRequest{RunID: fxRun, TaskID: "02_exec", Question: "Which API?",
		Options: []string{"a", "b"}, TimeoutSec: fxF(7200)})
	require.NoError(t, err)
	fxRequireEvents(t, dec.Events,
		fxE{events.TypeTaskWaiting, &events.TaskWaiting{TaskID: "02_exec", QuestionID: "id1", AskedAt: ms,
			Deadline: ms + 3600_000, Options: []string{"a", "b"}}},
		fxE{events.TypeAskRequested, &events.AskRequested{TaskID: "02_exec", QuestionID: "id1",
			Question: "Which API?", AskedAt: ms, Deadline: ms + 3600_000, TimeoutSec: 3600, Clamped: true,
			Options: []string{"a", "b"}}})
	require.Equal(t, WaitResult{OK: true, QuestionID: "id1",
		AskedAt: time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z"), Deadline: ms + 3600_000,
		TimeoutSec: 3600, Clamped: true}, dec.Result)
	l.apply(dec)

	task, _ := l.s.Task(fxRun, "02_exec")
	require.Equal(t, projections.TaskWaiting, task.Status)
	require.Equal(t, &projections.Waiting{QuestionID: "id1", AskedAt: ms, Deadline: ms + 3600_000,
		Options: []string{"a", "b"}}, task.Waiting)
	run, _ := l.s.Run(fxRun)
	require.Equal(t, &projections.WaitState{TaskID: "02_exec", QuestionID: "id1", AskedAt: ms}, run.WaitState)
	require.Equal(t, projections.RunRunning, run.Status, "a park does not change the run status")

	dec, err = fxDecide(t, l.s, &WaitResolve{RunID: fxRun, TaskID: "02_exec", QuestionID: "other"})
	fxRejected(t, dec, err, CodeBadParams, "invalid-params", `not waiting on question "other"`)

	dec, err = fxDecide(t, l.s, &WaitRequest{RunID: fxRun, TaskID: "02_exec", Question: "again?"})
	fxRejected(t, dec, err, CodeBadParams, "invalid-params", "task 02_exec is waiting, not running")

	dec, err = fxDecide(t, l.s, &WaitResolve{RunID: fxRun, TaskID: "02_exec", QuestionID: "id1"})
	require.NoError(t, err)
	fxRequireEvents(t, dec.Events,
		fxE{events.TypeAskAnswered, &events.AskAnswered{TaskID: "02_exec", QuestionID: "id1"}},
		fxE{events.TypeTaskResumed, &events.TaskResumed{TaskID: "02_exec", QuestionID: "id1"}})
	require.Equal(t, ResolveResult{OK: true, TaskID: "02_exec", QuestionID: "id1"}, dec.Result)
	l.apply(dec)

	task, _ = l.s.Task(fxRun, "02_exec")
	require.Equal(t, projections.TaskRunning, task.Status)
	require.Nil(t, task.Waiting)
	run, _ = l.s.Run(fxRun)
	require.Nil(t, run.WaitState)
	a, _ := l.s.Ask(fxRun, "id1")
	require.Equal(t, projections.AskAnswered, a.Status)

	dec, err = fxDecide(t, l.s, &WaitResolve{RunID: fxRun, TaskID: "02_exec", QuestionID: "id1"})
	fxRejected(t, dec, err, CodeBadParams, "invalid-params", "not waiting")
}

func TestAskTimeoutClamp(t *testing.T) {
	for _, tc := range []struct {
		in      *float64
		want    int64
		clamped bool
	}{
		{nil, 600, false},
		{fxF(600), 600, false},
		{fxF(7200), 3600, true},
		{fxF(3600), 3600, false},
		{fxF(0), 1, true},
		{fxF(-5), 1, true},
		{fxF(0.5), 1, true},
		{fxF(90.9), 90, true},
		{fxF(1e300), 3600, true},
	} {
		l := fxRunning(t, 0)
		dec, err := fxDecide(t, l.s, &WaitRequest{RunID: fxRun, TaskID: "02_exec", Question: "q", TimeoutSec: tc.in})
		require.NoError(t, err)
		res := dec.Result.(WaitResult)
		require.Equal(t, tc.want, res.TimeoutSec)
		require.Equal(t, tc.clamped, res.Clamped)
		require.Equal(t, fxNow/1e6+tc.want*1000, res.Deadline)
	}
}

func TestWaitRequestRejections(t *testing.T) {
	l := fxRunning(t, 0).task("04_q", projections.TaskQueued)
	many := make([]string, MaxAskOptions+1)
	for i := range many {
		many[i] = "o"
	}
	for _, tc := range []struct {
		name               string
		cmd                WaitRequest
		code, reason, text string
	}{
		{"empty question", WaitRequest{TaskID: "02_exec"}, CodeBadParams, "invalid-params",
			"question must be 1..8192 chars"},
		{"long question", WaitRequest{TaskID: "02_exec", Question: strings.Repeat("q", MaxQuestionChars+1)},
			CodeBadParams, "invalid-params", "question"},
		{"17 options", WaitRequest{TaskID: "02_exec", Question: "q", Options: many}, CodeBadParams,
			"invalid-params", "options must hold 1..16 strings"},
		{"no options", WaitRequest{TaskID: "02_exec", Question: "q", Options: []string{}}, CodeBadParams,
			"invalid-params", "options must hold 1..16 strings"},
		{"empty option", WaitRequest{TaskID: "02_exec", Question: "q", Options: []string{"a", ""}}, CodeBadParams,
			"invalid-params", "option"},
		{"long option", WaitRequest{TaskID: "02_exec", Question: "q", Options: []string{strings.Repeat("o", 257)}},
			CodeBadParams, "invalid-params", "option"},
		{"NaN timeout", WaitRequest{TaskID: "02_exec", Question: "q", TimeoutSec: fxF(math.NaN())}, CodeBadParams,
			"invalid-params", "finite"},
		{"infinite timeout", WaitRequest{TaskID: "02_exec", Question: "q", TimeoutSec: fxF(math.Inf(1))},
			CodeBadParams, "invalid-params", "finite"},
		{"task not running", WaitRequest{TaskID: "04_q", Question: "q"}, CodeBadParams, "invalid-params",
			"04_q is queued, not running"},
		{"no task", WaitRequest{TaskID: "99_x", Question: "q"}, CodeNoTask, "no-task", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cmd.RunID = fxRun
			dec, err := fxDecide(t, l.s, &tc.cmd)
			fxRejected(t, dec, err, tc.code, tc.reason, tc.text)
		})
	}
	dec, err := fxDecide(t, l.s, &WaitRequest{RunID: "nope", TaskID: "02_exec", Question: "q"})
	fxRejected(t, dec, err, CodeNoManifest, "no-manifest", "")
	dec, err = fxDecide(t, l.s, &WaitResolve{RunID: fxRun, TaskID: "02_exec", QuestionID: strings.Repeat("q", 129)})
	fxRejected(t, dec, err, CodeBadParams, "invalid-params", "1..128")
	dec, err = fxDecide(t, l.s, &WaitResolve{RunID: fxRun, TaskID: "99_x", QuestionID: "q"})
	fxRejected(t, dec, err, CodeNoTask, "no-task", "")
}

func TestAskExpire(t *testing.T) {
	l := fxRunning(t, 0).task("03_test", projections.TaskRunning)
	// Asked a minute before fxNow with a 10 s timeout: overdue at fxNow.
	l.run(&WaitRequest{RunID: fxRun, TaskID: "02_exec", Question: "q", TimeoutSec: fxF(10)})
	l.run(&WaitRequest{RunID: fxRun, TaskID: "03_test", Question: "q"}) // 600 s: not yet due
	asks := l.s.Asks(fxRun)
	require.Len(t, asks, 2)
	due, notYet := asks[0], asks[1]

	dec, err := fxDecide(t, l.s, &AskExpire{RunID: fxRun, QuestionID: notYet.QuestionID})
	fxRejected(t, dec, err, CodeBadParams, "invalid-params", "not before")

	dec, err = fxDecide(t, l.s, &AskExpire{RunID: fxRun, QuestionID: due.QuestionID})
	require.NoError(t, err)
	fxRequireEvents(t, dec.Events,
		fxE{events.TypeAskTimedOut, &events.AskTimedOut{TaskID: "02_exec", QuestionID: due.QuestionID}},
		fxE{events.TypeTaskResumed, &events.TaskResumed{TaskID: "02_exec", QuestionID: due.QuestionID}})
	require.Equal(t, map[string]any{"ok": true, "taskId": "02_exec", "questionId": due.QuestionID,
		"resumed": true}, dec.Result)
	l.apply(dec)
	a, _ := l.s.Ask(fxRun, due.QuestionID)
	require.Equal(t, projections.AskTimedOut, a.Status)
	task, _ := l.s.Task(fxRun, "02_exec")
	require.Equal(t, projections.TaskRunning, task.Status)

	dec, err = fxDecide(t, l.s, &AskExpire{RunID: fxRun, QuestionID: due.QuestionID})
	fxRejected(t, dec, err, CodeBadParams, "invalid-params", "already timedout")
	dec, err = fxDecide(t, l.s, &AskExpire{RunID: fxRun, QuestionID: "nope"})
	fxRejected(t, dec, err, CodeBadParams, "invalid-params", "not found")
	dec, err = fxDecide(t, l.s, &AskExpire{RunID: "nope", QuestionID: "nope"})
	fxRejected(t, dec, err, CodeNoManifest, "no-manifest", "")
}

// A question whose task left waiting some other way (a budget abort
// cancelled it) still times out, without resuming the task.
func TestAskExpireOfACancelledTask(t *testing.T) {
	l := fxRunning(t, 0)
	l.run(&WaitRequest{RunID: fxRun, TaskID: "02_exec", Question: "q", TimeoutSec: fxF(1)})
	l.add(events.TypeTaskCancelled, &events.TaskCancelled{TaskID: "02_exec", Reason: ReasonBudgetAbort})
	qid := l.s.Asks(fxRun)[0].QuestionID
	dec, err := fxDecide(t, l.s, &AskExpire{RunID: fxRun, QuestionID: qid})
	require.NoError(t, err)
	fxRequireEvents(t, dec.Events, fxE{events.TypeAskTimedOut,
		&events.AskTimedOut{TaskID: "02_exec", QuestionID: qid}})
	l.apply(dec)
	run, _ := l.s.Run(fxRun)
	require.Nil(t, run.WaitState)
}

// The engine clock expires overdue questions once, as recorded commands.
func TestTickExpiresAsks(t *testing.T) {
	var now atomic.Int64 // the engine reads its clock from the writer goroutine
	now.Store(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	l, err := eventlog.Open("db", &eventlog.Options{FS: vfs.NewMem()})
	require.NoError(t, err)
	defer l.Close()
	e, err := Open(l, Options{Clock: clock, ExpiryInterval: -1})
	require.NoError(t, err)
	defer e.Close()
	do := func(actor events.Actor, c Command) json.RawMessage {
		r, err := e.Submit(context.Background(), Request{Actor: actor, Command: c})
		require.NoError(t, err)
		require.Nil(t, r.Rejected, "%s", c.Kind())
		return r.Result
	}
	orch := events.Actor{Role: events.RoleOrchestrator}
	do(orch, &RunCreate{RunID: "R", Team: "t", Goal: "g", Cwd: "/w"})
	do(orch, &RunTransition{RunID: "R", To: "running"})
	do(orch, &TaskCreate{RunID: "R", TaskID: "02_exec", Role: "executor", Agent: "a", Title: "t", Cwd: "/w",
		StepID: "s"})
	do(orch, &TaskTransition{RunID: "R", TaskID: "02_exec", To: "running"})
	var res WaitResult
	require.NoError(t, json.Unmarshal(do(events.Actor{Role: events.RoleWorker, TaskID: "02_exec"},
		&WaitRequest{RunID: "R", TaskID: "02_exec", Question: "q", TimeoutSec: fxF(30)}), &res))

	now.Add(int64(29 * time.Second))
	require.Zero(t, e.Tick(context.Background()))
	now.Add(int64(time.Second))
	require.Equal(t, 1, e.Tick(context.Background()))
	require.Zero(t, e.Tick(context.Background()), "expired once")
	e.Read(func(s *projections.State) {
		a, _ := s.Ask("R", res.QuestionID)
		require.Equal(t, projections.AskTimedOut, a.Status)
		task, _ := s.Task("R", "02_exec")
		require.Equal(t, projections.TaskRunning, task.Status)
	})
	o, err := l.Outcome(events.EnginePrincipal().Key(), "ask-expire:R:"+res.QuestionID)
	require.NoError(t, err)
	require.True(t, o.Accepted())
}

// TestWaitRequestRefusesAnEmptyOptionsList: a question's options are absent or 1..16 strings (D§7.5 wait.request, as
// pi-crew's broker takes them, and docs/protocol.md says): options [] offers the worker's reader nothing to choose
// from, and was taken as a question without options. It is refused bad-params, as pi-crew refuses it, from the wire
// and after forwarding to the writer alike; absent (or null) is still a question without options.
func TestWaitRequestRefusesAnEmptyOptionsList(t *testing.T) {
	l := fxRunning(t, 0)
	w := Caller{Role: events.RoleWorker, RunID: fxRun, TaskID: "02_exec"}
	for params, refused := range map[string]bool{
		`{"question":"q","options":[]}`:    true,
		`{"question":"q","options":null}`:  false,
		`{"question":"q"}`:                 false,
		`{"question":"q","options":["a"]}`: false,
	} {
		cmd, err := ParseCommand("wait.request", json.RawMessage(params), w)
		require.NoError(t, err, params)
		b, err := EncodeRequest(Request{Principal: events.WorkerPrincipal(fxRun, "02_exec"), CommandID: "c",
			Command: cmd})
		require.NoError(t, err, params)
		forwarded, err := DecodeRequest(b)
		require.NoError(t, err, params)
		for how, c := range map[string]Command{"from the wire": cmd, "forwarded": forwarded.Command} {
			dec, err := fxDecide(t, l.s, c)
			if refused {
				fxRejected(t, dec, err, CodeBadParams, "invalid-params",
					"wait.request: options must hold 1..16 strings")
				continue
			}
			require.NoError(t, err, "%s %s", how, params)
		}
	}
}
