package commands

import (
	"math"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// Ask bounds (D§7.5, R5).
const (
	MaxQuestionChars    = events.MaxQuestionChars
	MaxAskOptions       = events.MaxAskOptions
	MaxAskOptionChars   = events.MaxAskOptionChars
	MaxQuestionIDChars  = events.MaxQuestionIDChars
	DefaultAskTimeout   = 600
	MaxAskTimeoutSec    = events.MaxAskTimeoutSec
	minAskTimeoutSecond = 1
)

// WaitRequest is a worker's wait.request (D§7.5, GS-17): its task parks on a
// question. The task goes waiting and the run's waitState points at the
// question; the run status does not change.
type WaitRequest struct {
	RunID    string
	TaskID   string // the caller's own task, from its credential
	Question string
	Options  []string
	// TimeoutSec is clamped to min(max(1, floor(t)), 3600); nil means 600.
	TimeoutSec *float64
}

// Kind implements Command.
func (*WaitRequest) Kind() string { return "wait.request" }

// WaitResult is the answer to wait.request. AskedAt is an ISO-8601 time
// (JavaScript's toISOString, as pi-crew answers) and Deadline unix
// milliseconds; Clamped says the timeout used differs from the one asked.
type WaitResult struct {
	OK         bool   `json:"ok"`
	QuestionID string `json:"questionId"`
	AskedAt    string `json:"askedAt"`
	Deadline   int64  `json:"deadline"`
	TimeoutSec int64  `json:"timeoutSec"`
	Clamped    bool   `json:"clamped"`
}

func (c *WaitRequest) decide(s *projections.State, env *Env) (Decision, error) {
	n := utf8.RuneCountInString(c.Question)
	manyOptions, badOption := events.AskOptionsProblem(c.Options)
	switch {
	case n == 0 || n > MaxQuestionChars:
		return Decision{}, badParams("wait.request: question must be 1..%d chars", MaxQuestionChars)
	case manyOptions || c.Options != nil && len(c.Options) == 0:
		// NB: options [] offers nothing to choose from; pi-crew's broker refuses it (D§7.5: 1..16 strings). Absent
		// (or null) is nil, a question without options.
		return Decision{}, badParams("wait.request: options must hold 1..%d strings", MaxAskOptions)
	case c.TimeoutSec != nil && (math.IsNaN(*c.TimeoutSec) || math.IsInf(*c.TimeoutSec, 0)):
		return Decision{}, badParams("wait.request: timeoutSec must be a finite number")
	case badOption:
		return Decision{}, badParams("wait.request: each option must be 1..%d chars", MaxAskOptionChars)
	}
	if _, ok := s.Run(c.RunID); !ok {
		return Decision{}, reject(CodeNoManifest, "no-manifest", "run %q not found", c.RunID)
	}
	if !s.Config().WaitMethodsEnabled {
		return waitMethodsOff(c.RunID, c.TaskID, c.Kind(), env)
	}
	// NB: a run's end ends no task, and closes the questions asked before it (ask_end.go): one asked after it
	// would outlive it. The broker refuses a worker of an ended run before this, against the state it publishes.
	if status, _ := s.RunStatus(c.RunID); status.Stale() {
		return Decision{}, reject(CodeForbidden, "run-terminal", "wait.request: run %s is %s", c.RunID, status)
	}
	t, ok := s.Task(c.RunID, c.TaskID)
	if !ok {
		return Decision{}, reject(CodeNoTask, "no-task", "task %q not found in run %q", c.TaskID, c.RunID)
	}
	if t.Status != projections.TaskRunning {
		return Decision{}, badParams("wait.request: task %s is %s, not running", c.TaskID, t.Status)
	}
	timeout, clamped := askTimeout(c.TimeoutSec)
	qid := env.NewID()
	askedAt := env.millis()
	deadline := askedAt + timeout*1000
	var opts []string
	if len(c.Options) > 0 {
		opts = slices.Clone(c.Options) // the payload must not alias the caller's slice
	}
	evs := []events.Event{
		env.event(c.RunID, events.TypeTaskWaiting, &events.TaskWaiting{
			TaskID: c.TaskID, QuestionID: qid, AskedAt: askedAt, Deadline: deadline, Options: opts,
		}),
		env.event(c.RunID, events.TypeAskRequested, &events.AskRequested{
			TaskID: c.TaskID, QuestionID: qid, Question: c.Question, AskedAt: askedAt, Deadline: deadline,
			TimeoutSec: timeout, Clamped: clamped, Options: opts,
		}),
	}
	return Decision{Events: evs, Result: WaitResult{
		OK: true, QuestionID: qid, AskedAt: isoMillis(askedAt), Deadline: deadline, TimeoutSec: timeout,
		Clamped: clamped,
	}}, nil
}

// waitMethodsOff refuses a wait method that the config switches off: policy-disabled in pi-crew's words, with a
// policy.action event, so the refusal leaves a trace (D§3.6).
func waitMethodsOff(runID, taskID, method string, env *Env) (Decision, error) {
	ev := env.event(runID, events.TypePolicyAction, &events.PolicyAction{
		TaskID: taskID, Action: method, Reason: events.ReasonWaitMethodsDisabled, Policy: events.PolicyWaitMethodsOff,
	})
	return Decision{Events: []events.Event{ev}}, reject(CodePolicyDisabled, events.ReasonWaitMethodsDisabled,
		"%s is disabled: broker.waitMethodsEnabled=false (fail-closed; policy.action recorded)", method)
}

// isoMillis formats unix milliseconds as JavaScript's Date.prototype.toISOString.
func isoMillis(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z") }

// askTimeout applies pi-crew's clamp min(max(1, floor(t)), 3600), default
// 600. clamped reports that the result is not exactly what was asked.
func askTimeout(t *float64) (sec int64, clamped bool) {
	if t == nil {
		return DefaultAskTimeout, false
	}
	f := math.Min(math.Max(minAskTimeoutSecond, math.Floor(*t)), MaxAskTimeoutSec)
	return int64(f), f != *t
}

// WaitResolve is a worker's wait.resolve (D§7.5, GS-17): its task, parked on
// QuestionID, resumes. Any other question id is bad-params and changes
// nothing (R4).
type WaitResolve struct {
	RunID      string
	TaskID     string // the caller's own task
	QuestionID string
}

// Kind implements Command.
func (*WaitResolve) Kind() string { return "wait.resolve" }

// ResolveResult is the answer to wait.resolve.
type ResolveResult struct {
	OK         bool   `json:"ok"`
	TaskID     string `json:"taskId"`
	QuestionID string `json:"questionId"`
}

func (c *WaitResolve) decide(s *projections.State, env *Env) (Decision, error) {
	if !events.QuestionIDOK(c.QuestionID) {
		return Decision{}, badParams("wait.resolve: questionId must be 1..%d chars", MaxQuestionIDChars)
	}
	if _, ok := s.Run(c.RunID); !ok {
		return Decision{}, reject(CodeNoManifest, "no-manifest", "run %q not found", c.RunID)
	}
	if !s.Config().WaitMethodsEnabled {
		return waitMethodsOff(c.RunID, c.TaskID, c.Kind(), env)
	}
	t, ok := s.Task(c.RunID, c.TaskID)
	if !ok {
		return Decision{}, reject(CodeNoTask, "no-task", "task %q not found in run %q", c.TaskID, c.RunID)
	}
	if !t.ParkedOn(c.QuestionID) {
		return Decision{}, badParams("wait.resolve: task %s is not waiting on question %q", c.TaskID, c.QuestionID)
	}
	evs := []events.Event{
		env.event(c.RunID, events.TypeAskAnswered, &events.AskAnswered{TaskID: c.TaskID, QuestionID: c.QuestionID}),
		env.event(c.RunID, events.TypeTaskResumed, &events.TaskResumed{TaskID: c.TaskID, QuestionID: c.QuestionID}),
	}
	return Decision{Events: evs, Result: ResolveResult{OK: true, TaskID: c.TaskID, QuestionID: c.QuestionID}}, nil
}

// AskExpire is submitted by the engine clock for a pending question past its
// deadline: the question times out and, if its task is still parked on it,
// the task resumes (running), so no worker waits past the server-clamped
// deadline. A question whose task already left waiting is closed all the
// same, which clears the run's waitState. Before its deadline the clock
// submits it for a question nobody can answer any more (projections'
// StrandedAsks): one whose task no longer waits on it is closed for
// events.AskReasonAskerEnded, one of a run that has ended for
// events.AskReasonRunEnded, its task resuming as at the deadline — what the
// end would have decided (ask_end.go), but a log written before it did, or an
// imported history, left such questions pending. For a question already
// closed that the run's waitState still points at, it records the closing of
// the question's own task, which releases the park.
type AskExpire struct {
	RunID      string
	QuestionID string
}

// Kind implements Command.
func (*AskExpire) Kind() string { return "ask.expire" }

func (c *AskExpire) decide(s *projections.State, env *Env) (Decision, error) {
	run, ok := s.Run(c.RunID)
	if !ok {
		return Decision{}, reject(CodeNoManifest, "no-manifest", "run %q not found", c.RunID)
	}
	a, ok := s.Ask(c.RunID, c.QuestionID)
	if !ok {
		return Decision{}, badParams("ask.expire: question %q not found in run %q", c.QuestionID, c.RunID)
	}
	if a.Status != projections.AskPending {
		w := run.WaitState
		if w == nil || w.QuestionID != a.QuestionID {
			return Decision{}, badParams("ask.expire: question %q is already %s", c.QuestionID, a.Status)
		}
		// NB: a closing that named another task than the question's closed it and left the run parked on it (R4);
		// the closing its own task would have recorded clears the park, and changes nothing else.
		ev := env.event(c.RunID, events.TypeAskTimedOut,
			&events.AskTimedOut{TaskID: w.TaskID, QuestionID: a.QuestionID})
		return Decision{Events: []events.Event{ev}, Result: map[string]any{"ok": true, "taskId": w.TaskID,
			"questionId": a.QuestionID, "resumed": false}}, nil
	}
	t, found := s.Task(c.RunID, a.TaskID)
	parked := found && t.ParkedOn(a.QuestionID)
	reason := "" // its deadline
	if env.millis() < a.Deadline {
		switch {
		case !parked:
			reason = events.AskReasonAskerEnded
		case run.Status.Stale():
			reason = events.AskReasonRunEnded
		default:
			return Decision{}, badParams("ask.expire: question %q expires at %d, not before",
				c.QuestionID, a.Deadline)
		}
	}
	var evs []events.Event
	if parked {
		evs = expireParked(s, env, c.RunID, t, reason)
	} else {
		evs = []events.Event{env.event(c.RunID, events.TypeAskTimedOut,
			&events.AskTimedOut{TaskID: a.TaskID, QuestionID: a.QuestionID, Reason: reason})}
	}
	return Decision{Events: evs, Result: map[string]any{"ok": true, "taskId": a.TaskID, "questionId": a.QuestionID,
		"resumed": parked}}, nil
}
