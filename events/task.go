package events

// Task lifecycle event types (D§3.4).
const (
	TypeTaskCreated        = "task.created"
	TypeTaskStarted        = "task.started"
	TypeTaskCompleted      = "task.completed"
	TypeTaskFailed         = "task.failed"
	TypeTaskCancelled      = "task.cancelled"
	TypeTaskSkipped        = "task.skipped"
	TypeTaskNeedsAttention = "task.needs_attention"
	TypeTaskRetried        = "task.retried"
	TypeTaskWaiting        = "task.waiting"
	TypeTaskResumed        = "task.resumed"
	TypeTaskUsage          = "task.usage"
)

// Task kinds of TaskCreated.Kind (schema version 2).
const (
	TaskKindWorkflow = "workflow" // a task materialised from a workflow step
	TaskKindShadow   = "shadow"   // a delegation's shadow task (pi-crew: no stepId)
)

// TaskKindOf is the kind pi-crew's structural rule (BR-09) gives a task: a
// shadow has no stepId. It is the derived default of Kind for version-1
// payloads, which predate the field.
func TaskKindOf(stepID string) string {
	if stepID == "" {
		return TaskKindShadow
	}
	return TaskKindWorkflow
}

// TaskCreated adds a task in status queued. It carries every field
// pi-crew's reconstruction lost (role, agent, title, cwd, dependsOn).
//
// Schema version 2 added Kind, so that readers (subscribers, the importer,
// tools) need not know that "no stepId" means a shadow; version-1 payloads
// are upcast with Kind = TaskKindOf(StepID).
type TaskCreated struct {
	TaskID    string   `json:"taskId" msgpack:"taskId"`
	Role      string   `json:"role" msgpack:"role"`
	Agent     string   `json:"agent" msgpack:"agent"`
	Title     string   `json:"title" msgpack:"title"`
	Cwd       string   `json:"cwd" msgpack:"cwd"`
	DependsOn []string `json:"dependsOn" msgpack:"dependsOn"`
	// StepID is present on every workflow task; only shadow tasks lack one.
	StepID string `json:"stepId,omitempty" msgpack:"stepId,omitempty"`
	// Depth 0 means absent, which counts as depth 1 (a worker).
	Depth int    `json:"depth,omitempty" msgpack:"depth,omitempty"`
	Model string `json:"model,omitempty" msgpack:"model,omitempty"`
	// Kind is TaskKindWorkflow or TaskKindShadow (version 2).
	Kind string `json:"kind" msgpack:"kind"`
}

// Shadow reports whether the payload creates a delegation's shadow task.
func (p *TaskCreated) Shadow() bool { return p.Kind == TaskKindShadow }

// TaskStarted moves a task to running (D§3.4 payload). A non-empty Cwd
// replaces the task's cwd: in worktree mode the execution cwd is only known
// when the task starts, and it is what the workspace gate compares.
type TaskStarted struct {
	TaskID         string `json:"taskId" msgpack:"taskId"`
	Role           string `json:"role,omitempty" msgpack:"role,omitempty"`
	Agent          string `json:"agent,omitempty" msgpack:"agent,omitempty"`
	Runtime        string `json:"runtime,omitempty" msgpack:"runtime,omitempty"`
	Cwd            string `json:"cwd,omitempty" msgpack:"cwd,omitempty"`
	WorktreePath   string `json:"worktreePath,omitempty" msgpack:"worktreePath,omitempty"`
	WorktreeBranch string `json:"worktreeBranch,omitempty" msgpack:"worktreeBranch,omitempty"`
	WorktreeReused bool   `json:"worktreeReused,omitempty" msgpack:"worktreeReused,omitempty"`
}

// TaskEnded is the shape of task.completed, task.failed and
// task.needs_attention (pi-crew: message = error, data {failureCause}).
type TaskEnded struct {
	TaskID       string `json:"taskId" msgpack:"taskId"`
	Error        string `json:"error,omitempty" msgpack:"error,omitempty"`
	FailureCause string `json:"failureCause,omitempty" msgpack:"failureCause,omitempty"`
}

// Terminal task payloads that share TaskEnded's shape.
type (
	TaskCompleted      TaskEnded
	TaskFailed         TaskEnded
	TaskNeedsAttention TaskEnded
)

// TaskCancelled is pi-crew's {reason, phase?}.
type TaskCancelled struct {
	TaskID string `json:"taskId" msgpack:"taskId"`
	Reason string `json:"reason,omitempty" msgpack:"reason,omitempty"`
	Phase  string `json:"phase,omitempty" msgpack:"phase,omitempty"`
}

// TaskSkipped marks a task that will never run (e.g. never dispatched when a
// run aborts on budget).
type TaskSkipped struct {
	TaskID string `json:"taskId" msgpack:"taskId"`
	Reason string `json:"reason,omitempty" msgpack:"reason,omitempty"`
}

// TaskRetried sends a task back to queued: the only way out of a terminal
// status (explicit retry or crash recovery of a running task).
type TaskRetried struct {
	TaskID string `json:"taskId" msgpack:"taskId"`
	Reason string `json:"reason,omitempty" msgpack:"reason,omitempty"`
}

// TaskWaiting parks a task on a question (D§2.3 waiting marker). It is
// followed in the same batch by ask.requested.
type TaskWaiting struct {
	TaskID     string   `json:"taskId" msgpack:"taskId"`
	QuestionID string   `json:"questionId" msgpack:"questionId"`
	AskedAt    int64    `json:"askedAt" msgpack:"askedAt"`
	Deadline   int64    `json:"deadline" msgpack:"deadline"`
	Options    []string `json:"options,omitempty" msgpack:"options,omitempty"`
}

// TaskResumed un-parks a waiting task (back to running).
type TaskResumed struct {
	TaskID     string `json:"taskId" msgpack:"taskId"`
	QuestionID string `json:"questionId" msgpack:"questionId"`
}

// TaskUsage reports a task's CUMULATIVE usage: each report replaces the
// previous totals (an idempotent report, like pi-crew's task.usage field),
// it is not a delta. Run budget enforcement counts input+output+cacheWrite.
type TaskUsage struct {
	TaskID     string  `json:"taskId" msgpack:"taskId"`
	Input      int64   `json:"input" msgpack:"input"`
	Output     int64   `json:"output" msgpack:"output"`
	CacheRead  int64   `json:"cacheRead" msgpack:"cacheRead"`
	CacheWrite int64   `json:"cacheWrite" msgpack:"cacheWrite"`
	Cost       float64 `json:"cost,omitempty" msgpack:"cost,omitempty"`
	Turns      int64   `json:"turns,omitempty" msgpack:"turns,omitempty"`
}
