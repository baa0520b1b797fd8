package projections

import (
	"cmp"
	"slices"

	"github.com/crewlog/crewlog/events"
)

// TaskStatus is a status of the D§2.4 task machine.
type TaskStatus string

// Task statuses (D§2.4). A task starts queued.
const (
	TaskQueued         TaskStatus = "queued"
	TaskRunning        TaskStatus = "running"
	TaskWaiting        TaskStatus = "waiting"
	TaskCompleted      TaskStatus = "completed"
	TaskFailed         TaskStatus = "failed"
	TaskCancelled      TaskStatus = "cancelled"
	TaskSkipped        TaskStatus = "skipped"
	TaskNeedsAttention TaskStatus = "needs_attention"
)

// Terminal reports whether st is in pi-crew's terminal set.
func (st TaskStatus) Terminal() bool {
	switch st {
	case TaskCompleted, TaskFailed, TaskCancelled, TaskSkipped, TaskNeedsAttention:
		return true
	}
	return false
}

// Task is the read model of a task. Shadow tasks (delegations) are tasks too:
// Kind shadow and Agent "delegate", and a grandchild that delegates finds
// its own record here. Times are unix milliseconds.
type Task struct {
	RunID  string `json:"runId" msgpack:"runId"`
	TaskID string `json:"id" msgpack:"id"`
	// Kind is events.TaskKindWorkflow or events.TaskKindShadow, as
	// task.created (v2) or delegate.admitted recorded it. It is not on the
	// wire: a task's JSON keeps pi-crew's shape.
	Kind   string     `json:"-" msgpack:"kind"`
	StepID string     `json:"stepId,omitempty" msgpack:"stepId"`
	Role   string     `json:"role" msgpack:"role"`
	Agent  string     `json:"agent" msgpack:"agent"`
	Title  string     `json:"title" msgpack:"title"`
	Status TaskStatus `json:"status" msgpack:"status"`
	Cwd    string     `json:"cwd" msgpack:"cwd"`
	// DependsOn may alias the payload it came from; it is never mutated.
	DependsOn []string `json:"dependsOn" msgpack:"dependsOn"`
	// Depth 0 means absent, which counts as 1; see EffectiveDepth.
	Depth int    `json:"depth,omitempty" msgpack:"depth"`
	Model string `json:"model,omitempty" msgpack:"model"`
	// Allocation is the task's delegation budget, filled by queries from the
	// ledger (the single source); nil when the task has no ledger account.
	// NB: always nil inside the state.
	Allocation   *Allocation `json:"allocation,omitempty" msgpack:"allocation,omitempty"`
	Waiting      *Waiting    `json:"waiting,omitempty" msgpack:"waiting"`
	Usage        Usage       `json:"usage" msgpack:"usage"`
	Error        string      `json:"error,omitempty" msgpack:"error"`
	FailureCause string      `json:"failureCause,omitempty" msgpack:"failureCause"`
	// StatusReason is the reason of the last cancel, skip or retry.
	StatusReason string `json:"statusReason,omitempty" msgpack:"statusReason"`
	// Retries counts task.retried events.
	Retries    int   `json:"retries,omitempty" msgpack:"retries"`
	CreatedAt  int64 `json:"createdAt" msgpack:"createdAt"`
	StartedAt  int64 `json:"startedAt,omitempty" msgpack:"startedAt"`
	FinishedAt int64 `json:"finishedAt,omitempty" msgpack:"finishedAt"`
	// ActorEvents and ActorBytes are the events and the bytes of text (what the run's bytes quota counts of each,
	// RunUsage.Bytes) the task's worker appended to the run as its actor and, under the config's ShareByDelegator
	// in force at each event, what the workers of the delegations it started appended (shareHolder) and the
	// messages that delivered those delegations' results (resultOf): what a worker's share of the events and bytes
	// quotas counts (config quotaWorkerShare). A shadow task's count only what its worker appended while the knob
	// was off. They are engine bookkeeping, not part of the wire shape.
	ActorEvents int64 `json:"-" msgpack:"actorEvents"`
	ActorBytes  int64 `json:"-" msgpack:"actorBytes"`
	// SlotWaitAt is, under the config's WorkerSlotShare, when the task's worker, or the worker of a delegation it
	// started, was last refused a slot while the task held fewer than its share with its delegations
	// (worker_slots.go); 0 when it has been admitted since, or never refused. Engine bookkeeping, not part of the
	// wire shape.
	SlotWaitAt int64 `json:"-" msgpack:"slotWaitAt"`

	// ord is the task's place in its run's creation order (runState.taskOrder), which orders the run's tasks
	// that have not ended. NB: set by addTask inside the state; a query's copy carries 0.
	ord int
}

// Allocation is a task's delegation budget (D§2.3): tokensGranted is
// write-once, tokensSpent never decreases.
type Allocation struct {
	TokensGranted int64 `json:"tokensGranted" msgpack:"tokensGranted"`
	TokensSpent   int64 `json:"tokensSpent" msgpack:"tokensSpent"`
}

// Waiting is the park marker of a task parked on a question; a task carries
// it iff its status is waiting (R4).
type Waiting struct {
	QuestionID string   `json:"questionId" msgpack:"questionId"`
	AskedAt    int64    `json:"askedAt" msgpack:"askedAt"`
	Deadline   int64    `json:"deadline" msgpack:"deadline"`
	Options    []string `json:"options,omitempty" msgpack:"options"`
}

// Usage is the task's cumulative token usage, as last reported.
type Usage struct {
	Input      int64   `json:"input" msgpack:"input"`
	Output     int64   `json:"output" msgpack:"output"`
	CacheRead  int64   `json:"cacheRead" msgpack:"cacheRead"`
	CacheWrite int64   `json:"cacheWrite" msgpack:"cacheWrite"`
	Cost       float64 `json:"cost,omitempty" msgpack:"cost"`
	Turns      int64   `json:"turns,omitempty" msgpack:"turns"`
}

// Budgeted is the usage run budget enforcement counts: input + output +
// cacheWrite, not cacheRead (D§2.3), each counter within
// 0..events.MaxUsageTokens, the bound task.usage and an import hold a
// report to. NB: a log they did not write (an older crewd's, a damaged one)
// may record any counter: a negative one counts nothing, as a negative spend
// adds nothing (events.AddSpend), and one beyond the bound counts as the
// bound, so that a run's sum (Run.BudgetUsed, kept by the differences of
// reports) never saturates, and a report replacing another takes off what
// that one counted, no more: a negative counter handed the budget back, a
// difference of two reports wrapped, and a report replacing a saturated one
// took every other task's use off with it.
func (u Usage) Budgeted() int64 {
	return budgetCount(u.Input) + budgetCount(u.Output) + budgetCount(u.CacheWrite)
}

// budgetCount is what a usage counter n counts towards the run's budget: n within 0..events.MaxUsageTokens.
func budgetCount(n int64) int64 { return min(max(n, 0), events.MaxUsageTokens) }

// EffectiveDepth is the task's depth with absent counted as 1 (a worker).
func (t Task) EffectiveDepth() int {
	if t.Depth == 0 {
		return 1
	}
	return t.Depth
}

// Shadow reports whether the task is a delegation's shadow task. It is the
// one definition every rule uses (budget abort, msg.send "all",
// task.transition, credential.issue): the kind recorded when the task was
// created, never the absent stepId, which task.create allows for workflow
// tasks too.
func (t Task) Shadow() bool { return t.Kind == events.TaskKindShadow }

// ParkedOn reports whether the task waits on question questionID: the one question wait.resolve answers for it. NB:
// the one definition the engine clock's choice of stranded questions (State.StrandedAsks) and its ask.expire's
// decision share, so a question it submits as stranded is one ask.expire closes before its deadline.
func (t Task) ParkedOn(questionID string) bool {
	return t.Status == TaskWaiting && t.Waiting != nil && t.Waiting.QuestionID == questionID
}

// cloneValue is a deep copy of t, as a value: a query returns it, and a
// run's clone copies its tasks into one slab.
func (t *Task) cloneValue() Task {
	c := *t
	c.DependsOn = cloneSlice(t.DependsOn)
	if t.Waiting != nil {
		w := *t.Waiting
		w.Options = cloneSlice(w.Options)
		c.Waiting = &w
	}
	if t.Allocation != nil {
		a := *t.Allocation
		c.Allocation = &a
	}
	return c
}

func (r *runState) addTask(t *Task) {
	t.ord = len(r.taskOrder)
	r.tasks[t.TaskID] = t
	r.taskOrder = append(r.taskOrder, t.TaskID)
	if !t.Shadow() {
		r.workflowOrder = append(r.workflowOrder, t.TaskID)
	}
	if !t.Status.Terminal() {
		r.live = append(r.live, t.TaskID) // the newest task is last in creation order
		r.countLive(t, 1)
	}
	r.countRunning(t, 1)
	if t.SlotWaitAt != 0 {
		r.slotWaiters[t.TaskID] = struct{}{} // NB: a task decoded from a snapshot that waits
	}
}

// countLive adds d to r's count of live workflow tasks when t is one (LiveTasks). NB: shadow tasks are walked
// with the live ones but not counted: each follows a delegation in flight, and those hold the run's slots.
func (r *runState) countLive(t *Task, d int) {
	if !t.Shadow() {
		r.liveWorkflow += d
	}
}

// setTaskStatus moves t, a task of r, to st and keeps r's tasks that have not ended in creation order: a task that
// ends leaves them, a retried one takes its place again. NB: the order is the same whether the state was folded or
// loaded from a snapshot, which lists the tasks in creation order, so decisions that walk them decide alike.
func (r *runState) setTaskStatus(t *Task, st TaskStatus) {
	was := !t.Status.Terminal()
	r.countRunning(t, -1)
	t.setStatus(st)
	r.countRunning(t, 1)
	now := !t.Status.Terminal()
	if was == now {
		return
	}
	byOrd := func(id string, ord int) int { return cmp.Compare(r.tasks[id].ord, ord) }
	i, _ := slices.BinarySearchFunc(r.live, t.ord, byOrd)
	if now {
		r.live = slices.Insert(r.live, i, t.TaskID)
		r.countLive(t, 1)
		return
	}
	if i == 0 {
		// NB: tasks mostly end in the order they were created (a budget abort ends them so), and a run folded from
		// a log written before the bound may hold many more than it: shifting the rest at every end would be
		// quadratic.
		r.live = r.live[1:]
	} else {
		r.live = slices.Delete(r.live, i, i+1)
	}
	r.countLive(t, -1)
	if len(r.live) == 0 {
		r.live = nil // as a run loaded from a snapshot has it
	}
}

// roleCwd is a key of runState.running.
type roleCwd struct{ role, cwd string }

// countRunning adds d to r's count of running tasks of t's role and cwd when t is running (RunningTasks); a count
// that drops to zero leaves the map, so a state folded from events and one loaded from a snapshot hold the same.
func (r *runState) countRunning(t *Task, d int) {
	if t.Status != TaskRunning {
		return
	}
	k := roleCwd{t.Role, t.Cwd}
	if n := r.running[k] + d; n != 0 {
		r.running[k] = n
	} else {
		delete(r.running, k)
	}
}

// RunningTasks is the number of run runID's tasks, shadow ones included, in status running with role role and cwd
// cwd. It reads a count kept as tasks change status, not a walk of the run's tasks: delegate.request's workspace
// check asks it on the writer for every request a worker sends, and a run may hold thousands of live tasks.
func (s *State) RunningTasks(runID, role, cwd string) int {
	if r := s.run(runID); r != nil {
		return r.running[roleCwd{role, cwd}]
	}
	return 0
}

// setStatus moves t to st at time at; leaving waiting drops the park marker,
// so "waiting iff marker" holds whatever event moved the task.
func (t *Task) setStatus(st TaskStatus) {
	t.Status = st
	if st != TaskWaiting {
		t.Waiting = nil
	}
}

func applyTask(r *runState, ev events.Event) {
	at := ev.UnixMilli()
	if ev.Type == events.TypeTaskCreated {
		p := events.PayloadAs[events.TaskCreated](ev)
		if p == nil || r.tasks[p.TaskID] != nil {
			return
		}
		r.addTask(&Task{
			RunID:     r.run.RunID,
			TaskID:    p.TaskID,
			Kind:      p.Kind,
			StepID:    p.StepID,
			Role:      p.Role,
			Agent:     p.Agent,
			Title:     p.Title,
			Status:    TaskQueued,
			Cwd:       p.Cwd,
			DependsOn: p.DependsOn,
			Depth:     p.Depth,
			Model:     p.Model,
			CreatedAt: at,
		})
		return
	}
	switch ev.Type {
	case events.TypeTaskStarted:
		if p := events.PayloadAs[events.TaskStarted](ev); p != nil {
			if t := r.tasks[p.TaskID]; t != nil {
				r.setTaskStatus(t, TaskRunning)
				t.StartedAt = at
				if p.Cwd != "" {
					r.countRunning(t, -1)
					t.Cwd = p.Cwd
					r.countRunning(t, 1)
				}
			}
		}
	case events.TypeTaskCompleted:
		endTask(r, TaskCompleted, (*events.TaskEnded)(events.PayloadAs[events.TaskCompleted](ev)), at)
	case events.TypeTaskFailed:
		endTask(r, TaskFailed, (*events.TaskEnded)(events.PayloadAs[events.TaskFailed](ev)), at)
	case events.TypeTaskNeedsAttention:
		endTask(r, TaskNeedsAttention, (*events.TaskEnded)(events.PayloadAs[events.TaskNeedsAttention](ev)), at)
	case events.TypeTaskCancelled:
		if p := events.PayloadAs[events.TaskCancelled](ev); p != nil {
			if t := r.tasks[p.TaskID]; t != nil {
				r.setTaskStatus(t, TaskCancelled)
				t.StatusReason = p.Reason
				t.FinishedAt = at
			}
		}
	case events.TypeTaskSkipped:
		if p := events.PayloadAs[events.TaskSkipped](ev); p != nil {
			if t := r.tasks[p.TaskID]; t != nil {
				r.setTaskStatus(t, TaskSkipped)
				t.StatusReason = p.Reason
				t.FinishedAt = at
			}
		}
	case events.TypeTaskRetried:
		if p := events.PayloadAs[events.TaskRetried](ev); p != nil {
			if t := r.tasks[p.TaskID]; t != nil {
				// Like pi-crew's crash recovery: back to queued with the
				// run-specific fields cleared.
				r.setTaskStatus(t, TaskQueued)
				t.StatusReason = p.Reason
				t.StartedAt, t.FinishedAt = 0, 0
				t.Error, t.FailureCause = "", ""
				t.Retries++
			}
		}
	case events.TypeTaskWaiting:
		if p := events.PayloadAs[events.TaskWaiting](ev); p != nil {
			if t := r.tasks[p.TaskID]; t != nil {
				r.setTaskStatus(t, TaskWaiting)
				t.Waiting = &Waiting{QuestionID: p.QuestionID, AskedAt: p.AskedAt, Deadline: p.Deadline,
					Options: p.Options}
			}
		}
	case events.TypeTaskResumed:
		if p := events.PayloadAs[events.TaskResumed](ev); p != nil {
			if t := r.tasks[p.TaskID]; t != nil {
				r.setTaskStatus(t, TaskRunning)
			}
		}
	case events.TypeTaskUsage:
		if p := events.PayloadAs[events.TaskUsage](ev); p != nil {
			if t := r.tasks[p.TaskID]; t != nil {
				u := Usage{Input: p.Input, Output: p.Output, CacheRead: p.CacheRead, CacheWrite: p.CacheWrite,
					Cost: p.Cost, Turns: p.Turns}
				r.run.BudgetUsed = SaturatingAdd(r.run.BudgetUsed, u.Budgeted()-t.Usage.Budgeted())
				t.Usage = u
			}
		}
	}
}

func endTask(r *runState, st TaskStatus, p *events.TaskEnded, at int64) {
	if p == nil {
		return
	}
	if t := r.tasks[p.TaskID]; t != nil {
		r.setTaskStatus(t, st)
		t.Error = p.Error
		t.FailureCause = p.FailureCause
		t.FinishedAt = at
	}
}

// Task returns task taskID of run runID (shadow tasks included), with its
// allocation.
func (s *State) Task(runID, taskID string) (Task, bool) {
	r := s.run(runID)
	if r == nil || r.tasks[taskID] == nil {
		return Task{}, false
	}
	return r.taskView(r.tasks[taskID]), true
}

// TaskStatus is Task(runID, taskID).Status without building the task's view: the broker reads it before every
// request of a worker.
func (s *State) TaskStatus(runID, taskID string) (TaskStatus, bool) {
	st, ok, _ := s.LookupTaskStatus(runID, taskID)
	return st, ok
}

// LookupTaskStatus is TaskStatus, with the error (ErrNotReadBack) met reading a cold run back from the log: its
// tasks are not known to be none, and must not be answered as if the task did not exist.
func (s *State) LookupTaskStatus(runID, taskID string) (TaskStatus, bool, error) {
	r, err := s.lookupRun(runID)
	if r == nil || r.tasks[taskID] == nil {
		return "", false, err
	}
	return r.tasks[taskID].Status, true, nil
}

// TaskAttempt is TaskStatus with the task's Retries, without building the task's view: a worker's connection belongs
// to the attempt it said hello in, and the broker reads both before every request of a worker.
func (s *State) TaskAttempt(runID, taskID string) (status TaskStatus, retries int, ok bool) {
	r := s.run(runID)
	if r == nil || r.tasks[taskID] == nil {
		return "", 0, false
	}
	t := r.tasks[taskID]
	return t.Status, t.Retries, true
}

// LookupTaskStatuses is LookupTaskStatus for each of taskIDs, the run looked up once: a list of them (a page of
// credentials) reads a cold run's summary once, not once a task, under the state's lock. The i-th status is
// taskIDs[i]'s, "" for a task the run does not have; the statuses are nil when the run is unknown, or with the error.
func (s *State) LookupTaskStatuses(runID string, taskIDs []string) ([]TaskStatus, error) {
	r, err := s.lookupRun(runID)
	if r == nil {
		return nil, err
	}
	out := make([]TaskStatus, len(taskIDs))
	for i, id := range taskIDs {
		if t := r.tasks[id]; t != nil {
			out[i] = t.Status
		}
	}
	return out, nil
}

// LiveTasks is the number of run runID's workflow tasks not in a terminal status (queued, running or waiting):
// what a budget abort of the run cancels or skips in one decision.
func (s *State) LiveTasks(runID string) int {
	if r := s.run(runID); r != nil {
		return r.liveWorkflow
	}
	return 0
}

// EachLiveTask calls fn with each of run runID's tasks not in a terminal status — its live workflow tasks and the
// shadow tasks of its delegations in flight — in creation order, until fn returns false. It walks only those,
// however many tasks the run has ended, and copies none: t is a shallow copy without its allocation, and fn must
// not modify what its slices and pointers reach. Decisions that read the live tasks use it; a query returns
// Tasks' deep copies.
func (s *State) EachLiveTask(runID string, fn func(t Task) bool) {
	if r := s.run(runID); r != nil {
		r.eachTask(r.live, fn)
	}
}

// EachWorkflowTask is EachLiveTask over every workflow task of run runID, ended ones included, and no shadow task:
// it walks the run's workflow tasks only, however many delegations the run has settled.
func (s *State) EachWorkflowTask(runID string, fn func(t Task) bool) {
	if r := s.run(runID); r != nil {
		r.eachTask(r.workflowOrder, fn)
	}
}

// eachTask calls fn with a shallow copy of each task of ids until it returns false.
func (r *runState) eachTask(ids []string, fn func(t Task) bool) {
	for _, id := range ids {
		t := *r.tasks[id]
		t.ord = 0
		if !fn(t) {
			return
		}
	}
}

// Tasks returns the tasks of run runID in creation order (shadow tasks
// included, at their admission), each with its allocation.
func (s *State) Tasks(runID string) []Task {
	p, _ := s.TasksPage(runID, PageFilter{})
	return p.Items
}

func (r *runState) taskView(t *Task) Task {
	v := t.cloneValue()
	v.ord = 0
	if a := r.accounts[t.TaskID]; a != nil {
		v.Allocation = &Allocation{TokensGranted: a.TokensGranted, TokensSpent: a.TokensSpent}
	}
	return v
}
