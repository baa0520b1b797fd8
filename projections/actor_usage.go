package projections

import "github.com/crewlog/crewlog/events"

// countActor adds event ev, just folded into run r, to what its actor appended when the actor is a worker of one
// of r's tasks: one event, and the bytes ev added to what the run's bytes quota counts (RunUsage.Bytes, which was
// bytesBefore), so a worker's share of the events and bytes quotas counts by the same measure as the run's. The
// task is looked up after the fold, so a task.created a worker appends counts for its creator, never for the task
// it creates; an actor naming no task of the run counts for none.
func countActor(r *runState, ev events.Event, bytesBefore int64) {
	if ev.Actor.Role != events.RoleWorker || ev.Actor.TaskID == "" {
		return
	}
	t := r.tasks[ev.Actor.TaskID]
	if t == nil {
		return
	}
	t.ActorEvents = SaturatingAdd(t.ActorEvents, 1)
	t.ActorBytes = SaturatingAdd(t.ActorBytes, r.run.Usage.Bytes()-bytesBefore)
}

// WorkerAppended is what the worker of task taskID of run runID appended to the run as its actor: its events and
// the bytes of text they added (Task.ActorEvents, ActorBytes), a cold run's read back as Task reads it; 0 and 0 for
// a task or run the state does not know.
func (s *State) WorkerAppended(runID, taskID string) (evs, bytes int64) {
	r := s.run(runID)
	if r == nil {
		return 0, 0
	}
	t := r.tasks[taskID]
	if t == nil {
		return 0, 0
	}
	return t.ActorEvents, t.ActorBytes
}
