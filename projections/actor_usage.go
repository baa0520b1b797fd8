package projections

import (
	"strings"

	"github.com/crewlog/crewlog/events"
)

// countActor adds event ev, just folded into run r, to what its actor appended when the actor is a worker of one
// of r's tasks: one event, and the bytes ev added to what the run's bytes quota counts (RunUsage.Bytes, which was
// bytesBefore), so a worker's share of the events and bytes quotas counts by the same measure as the run's. The
// task is looked up after the fold, so a task.created a worker appends counts for its creator, never for the task
// it creates; an actor naming no task of the run counts for none. Under the config's ShareByDelegator in force at
// ev's position, it counts for the task that holds the actor's share (shareHolder: a grandchild's appends are its
// delegating worker's), and a delegation's result (resultOf), which the runtime or the engine's clock appends,
// counts for the share of the task that made the delegation; without it (every log written before the knob) for
// the actor's own task, and a result for none, as such a log was decided.
func countActor(s *State, r *runState, ev events.Event, bytesBefore int64) {
	byDelegator := s.config.ShareByDelegator
	var taskID string
	switch {
	case ev.Actor.Role == events.RoleWorker:
		taskID = ev.Actor.TaskID
	case byDelegator && ev.Type == events.TypeMailboxAppended:
		taskID = r.resultOf(ev)
	}
	if taskID == "" {
		return
	}
	if byDelegator {
		taskID = r.shareHolder(taskID)
	}
	t := r.tasks[taskID]
	if t == nil {
		return
	}
	t.ActorEvents++
	t.ActorBytes = SaturatingAdd(t.ActorBytes, r.run.Usage.Bytes()-bytesBefore)
}

// resultOf is the task that made the delegation whose result mailbox.appended ev delivers, "" when ev delivers
// none. NB: a settlement's message, whatever its actor (the runtime's settle, the clock's expiry): its text is what
// the grandchild wrote, as long as D§6.2's fence lets it (65,536 chars), so a worker whose grandchildren each end
// with the longest result would otherwise grow its run past its share with a few events of its own.
func (r *runState) resultOf(ev events.Event) string {
	p := events.PayloadAs[events.MailboxAppended](ev)
	if p == nil || p.Data == nil || p.Data.SubID == "" {
		return ""
	}
	if sub, ok := strings.CutPrefix(p.From, events.ResultSenderPrefix); !ok || sub != p.Data.SubID {
		return ""
	}
	if d := r.dels[p.Data.SubID]; d != nil {
		return d.ParentTaskID
	}
	return ""
}

// WorkerAppended is what the workers whose share task taskID of run runID uses (ShareHolder) appended to the run
// as their actor: their events and the bytes of text they added (Task.ActorEvents, ActorBytes of the holder), a
// cold run's read back as Task reads it; 0 and 0 for a task or run the state does not know.
func (s *State) WorkerAppended(runID, taskID string) (evs, bytes int64) {
	r := s.run(runID)
	if r == nil {
		return 0, 0
	}
	t := r.tasks[s.quotaShareHolder(r, taskID)]
	if t == nil {
		return 0, 0
	}
	return t.ActorEvents, t.ActorBytes
}

// ShareHolder is the task of run runID whose share of the run's quotas the worker of task taskID uses: under the
// config's ShareByDelegator, shareHolder (taskID itself, or for a delegation's shadow task the workflow task that
// started the delegation); without it, taskID.
func (s *State) ShareHolder(runID, taskID string) string {
	if r := s.run(runID); r != nil {
		return s.quotaShareHolder(r, taskID)
	}
	return taskID
}

// quotaShareHolder is ShareHolder within run r.
func (s *State) quotaShareHolder(r *runState, taskID string) string {
	if !s.config.ShareByDelegator {
		return taskID
	}
	return r.shareHolder(taskID)
}

// shareHolder is the task whose share of the run's quotas (config quotaWorkerShare, quotaWorkerMsgShare) the
// worker of task taskID uses: taskID itself, unless it is a delegation's shadow task, whose worker uses the share of
// the task that made the delegation, and so on up to a workflow task. NB: a worker can start grandchildren, each a
// task with a credential of its own, as long as its slots and quotas let it; were each a share of its own, a worker
// would pass its share by delegating and sending from each grandchild, and take what its siblings need.
//
// The walk follows each shadow's delegation to its parent task, no further than maxShareHops (a decided log's
// chain is as long as its depth, 10 at most; a damaged one's could loop), and stops at a parent the run does not
// hold, so the holder is always a task of the run when taskID is one.
func (r *runState) shareHolder(taskID string) string {
	for range maxShareHops {
		t := r.tasks[taskID]
		if t == nil || !t.Shadow() {
			return taskID
		}
		d := r.dels[taskID]
		if d == nil || r.tasks[d.ParentTaskID] == nil {
			return taskID
		}
		taskID = d.ParentTaskID
	}
	return taskID
}

// maxShareHops bounds shareHolder's walk: more than any depth a config allows (1..10) or an import records.
const maxShareHops = 64
