package commands

import "github.com/crewlog/crewlog/projections"

// MaxLiveTasksPerRun bounds a run's workflow tasks that have not ended (queued, running or waiting). A budget abort
// cancels or skips every one of them in one decision, an event each, committed in one batch that the writer holds
// in memory and every reader and follower folds at once: without a bound, a run's orchestrator could queue as many
// tasks as its events quota lets it create (a million by default) and make that one decision hundreds of megabytes.
// pi-crew runs a few workers at a time (four by default): a bound of thousands leaves any real plan room.
//
// task.create, and a retry (task.transition → queued) of an ended task, are refused quota-exceeded while the run
// holds the most; the refusal records no event. Shadow tasks are not counted: each follows a delegation in flight,
// and those hold the run's slots.
const MaxLiveTasksPerRun = 4096

// liveTasksFull is the refusal of a command of method that would add a live task to run runID, or nil when the
// run has room for one more.
func liveTasksFull(s *projections.State, method, runID string) error {
	n := s.LiveTasks(runID)
	if n < MaxLiveTasksPerRun {
		return nil
	}
	// NB: n may pass the most: a run folded from a log written before the bound, or imported, may hold more.
	return reject(CodeQuotaExceeded, "quota-live-tasks",
		"%s: run %q holds %d tasks that have not ended (queued, running or waiting); a run may hold at most %d: "+
			"end one first", method, runID, n, MaxLiveTasksPerRun)
}
