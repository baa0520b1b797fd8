package commands

import (
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// MaxBodyChars bounds free text (goals, message bodies) like pi-crew's
// 256 Ki-char body limit.
const MaxBodyChars = events.MaxBodyChars

// TaskCreate adds a workflow task to a run, in status queued.
type TaskCreate struct {
	RunID     string
	TaskID    string
	Role      string
	Agent     string
	Title     string
	Cwd       string
	DependsOn []string
	StepID    string
	Model     string
	Depth     int
}

// Kind implements Command.
func (*TaskCreate) Kind() string { return "task.create" }

func (c *TaskCreate) decide(s *projections.State, env *Env) (Decision, error) {
	if _, ok := s.Run(c.RunID); !ok {
		return Decision{}, reject(CodeNoManifest, "no-manifest", "run %q not found", c.RunID)
	}
	switch {
	case !safeID(c.TaskID) || c.TaskID == events.OrchestratorKey:
		return Decision{}, badParams("task.create: taskId must be 1..%d chars of [A-Za-z0-9_-]", MaxIDChars)
	case events.RecipientName(c.TaskID):
		return Decision{}, badParams("task.create: taskId %q is a recipient name of msg.send (%q, %q, %q), "+
			"not a task's", c.TaskID, ToParent, ToAll, ToGroup)
	case c.Role == "" || c.Agent == "":
		return Decision{}, badParams("task.create: role and agent are required")
	case !events.DepthOK(c.Depth):
		return Decision{}, badParams("task.create: depth must be in 0..%d", MaxMaxDepth)
	case len(c.DependsOn) > MaxDependsOn:
		return Decision{}, badParams("task.create: dependsOn must list at most %d tasks", MaxDependsOn)
	}
	if err := checkText(c.Kind(), textField{"role", c.Role, MaxIDChars}, textField{"agent", c.Agent, MaxIDChars},
		textField{"title", c.Title, MaxTitleChars}, textField{"cwd", c.Cwd, MaxCwdChars},
		textField{"stepId", c.StepID, MaxIDChars}, textField{"model", c.Model, MaxModelChars}); err != nil {
		return Decision{}, err
	}
	if _, exists := s.Task(c.RunID, c.TaskID); exists {
		return Decision{}, badParams("task.create: task %q already exists in run %q", c.TaskID, c.RunID)
	}
	for _, d := range c.DependsOn {
		if _, ok := s.Task(c.RunID, d); !ok {
			return Decision{}, badParams("task.create: dependency %q is not a task of run %q", d, c.RunID)
		}
	}
	if err := liveTasksFull(s, c.Kind(), c.RunID); err != nil {
		return Decision{}, err
	}
	deps := append([]string{}, c.DependsOn...)
	ev := env.event(c.RunID, events.TypeTaskCreated, &events.TaskCreated{
		TaskID: c.TaskID, Role: c.Role, Agent: c.Agent, Title: c.Title, Cwd: c.Cwd, DependsOn: deps,
		// NB: task.create makes workflow tasks only, with or without a
		// stepId; shadow tasks come from delegate.admitted.
		StepID: c.StepID, Depth: c.Depth, Model: c.Model, Kind: events.TaskKindWorkflow,
	})
	return Decision{Events: []events.Event{ev}, Result: map[string]any{"ok": true, "taskId": c.TaskID,
		"status": "queued"}}, nil
}

// taskTransitions is the D§2.4 machine, less the terminal → non-terminal
// edges other than → queued (SPEC §4.4: only an explicit retry leaves a
// terminal status), and less → waiting / waiting → running, which belong to
// asks (wait.request / wait.resolve).
var taskTransitions = map[projections.TaskStatus][]projections.TaskStatus{
	projections.TaskQueued: {projections.TaskRunning, projections.TaskCancelled, projections.TaskSkipped,
		projections.TaskFailed},
	projections.TaskRunning: {projections.TaskCompleted, projections.TaskFailed, projections.TaskCancelled,
		projections.TaskQueued, projections.TaskNeedsAttention},
	projections.TaskWaiting: {projections.TaskQueued, projections.TaskCompleted, projections.TaskFailed,
		projections.TaskCancelled},
	projections.TaskCompleted:      {projections.TaskQueued},
	projections.TaskFailed:         {projections.TaskQueued, projections.TaskCancelled},
	projections.TaskCancelled:      {projections.TaskQueued},
	projections.TaskSkipped:        {projections.TaskQueued, projections.TaskCancelled},
	projections.TaskNeedsAttention: {projections.TaskQueued},
}

// windsDown: a task ends in a terminal status, and a queued task has to run
// to complete. A retry (→ queued) is the only edge that comes round again,
// and is measured against the run's quotas (quota.go); without it a task
// reaches a terminal status in at most three transitions.
func (c *TaskTransition) windsDown(s *projections.State) bool {
	t, ok := s.Task(c.RunID, c.TaskID)
	if !ok {
		return true // refused, nothing recorded
	}
	to := projections.TaskStatus(c.To)
	return to.Terminal() || t.Status == projections.TaskQueued && to == projections.TaskRunning
}

// clippedTo implements statusTexter.
func (c *TaskTransition) clippedTo(n int) Command {
	short := *c
	if !clipTexts(n, &short.Error, &short.Reason, &short.Cwd) {
		return nil
	}
	return &short
}

// TaskTransition moves a workflow task along the D§2.4 machine. Shadow
// tasks follow their delegation and cannot be moved directly.
type TaskTransition struct {
	RunID  string
	TaskID string
	To     string
	Error  string // for failed / needs_attention
	Reason string // for cancelled / skipped / retried
	Cwd    string // execution cwd, for → running
}

// Kind implements Command.
func (*TaskTransition) Kind() string { return "task.transition" }

func (c *TaskTransition) decide(s *projections.State, env *Env) (Decision, error) {
	if err := checkText(c.Kind(), textField{"error", c.Error, MaxStatusTextChars},
		textField{"reason", c.Reason, MaxStatusTextChars}, textField{"cwd", c.Cwd, MaxCwdChars}); err != nil {
		return Decision{}, err
	}
	if _, ok := s.Run(c.RunID); !ok {
		return Decision{}, reject(CodeNoManifest, "no-manifest", "run %q not found", c.RunID)
	}
	t, ok := s.Task(c.RunID, c.TaskID)
	if !ok {
		return Decision{}, reject(CodeNoTask, "no-task", "task %q not found in run %q", c.TaskID, c.RunID)
	}
	if t.Shadow() {
		return Decision{}, badParams("task.transition: %s is a delegation's shadow task; settle or cancel the "+
			"delegation", c.TaskID)
	}
	to := projections.TaskStatus(c.To)
	if !contains(taskTransitions[t.Status], to) {
		return Decision{}, badParams("task.transition: task %s cannot go from %s to %q", c.TaskID, t.Status, c.To)
	}
	if t.Status.Terminal() && !to.Terminal() {
		if err := liveTasksFull(s, c.Kind(), c.RunID); err != nil {
			return Decision{}, err
		}
	}
	var typ string
	var p any
	switch to {
	case projections.TaskRunning:
		typ, p = events.TypeTaskStarted, &events.TaskStarted{TaskID: c.TaskID, Role: t.Role,
			Agent: t.Agent, Cwd: c.Cwd}
	case projections.TaskCompleted:
		typ, p = events.TypeTaskCompleted, &events.TaskCompleted{TaskID: c.TaskID}
	case projections.TaskFailed:
		typ, p = events.TypeTaskFailed, &events.TaskFailed{TaskID: c.TaskID, Error: c.Error}
	case projections.TaskNeedsAttention:
		typ, p = events.TypeTaskNeedsAttention, &events.TaskNeedsAttention{TaskID: c.TaskID, Error: c.Error}
	case projections.TaskCancelled:
		typ, p = events.TypeTaskCancelled, &events.TaskCancelled{TaskID: c.TaskID, Reason: c.Reason}
	case projections.TaskSkipped:
		typ, p = events.TypeTaskSkipped, &events.TaskSkipped{TaskID: c.TaskID, Reason: c.Reason}
	case projections.TaskQueued:
		typ, p = events.TypeTaskRetried, &events.TaskRetried{TaskID: c.TaskID, Reason: c.Reason}
	}
	// A task that leaves waiting here (→ running is wait.resolve's) closes its question first (ask_end.go).
	evs := append(closeQuestion(s, env, c.RunID, t, events.AskReasonAskerEnded), env.event(c.RunID, typ, p))
	return Decision{Events: evs, Result: map[string]any{"ok": true, "taskId": c.TaskID, "status": c.To}}, nil
}
