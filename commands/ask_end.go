package commands

import (
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// A question closes with its asker. A task that leaves waiting for anything but an answer or its deadline — an end in
// any terminal status, a retry, its delegation's settlement, its credential's revocation — and a run that ends time
// the question out in the same decision, with the ask.timedout the deadline would have recorded and the reason it did
// not wait for it (events.AskReasonAskerEnded, events.AskReasonRunEnded), so the question does not read as unanswered
// in time. Nobody can answer it any more (wait.resolve answers only the question its task is parked on), and left
// pending it would keep the run's waitState on a task no longer parked on it and an ended run hot past its retention
// until the deadline, up to an hour later. NB: the fold is unchanged, so a log written before folds as it did; a
// question such a log left pending is closed by the engine clock at its next tick (StrandedAsks, AskExpire), as the
// end would have closed it — but for a revocation's, whose task such a log leaves parked: it waits for its deadline.

// closeQuestion is the ask.timedout that closes the question t is parked on, for reason (events.AskReason..., ""
// for its deadline) if its deadline has not passed, or nil when t is parked on none (or on one already closed, which
// only a log written before can hold).
func closeQuestion(s *projections.State, env *Env, runID string, t projections.Task, reason string) []events.Event {
	if t.Status != projections.TaskWaiting || t.Waiting == nil {
		return nil
	}
	a, ok := s.Ask(runID, t.Waiting.QuestionID)
	if !ok || a.Status != projections.AskPending {
		return nil
	}
	if env.millis() >= a.Deadline {
		reason = "" // NB: past its deadline it timed out, whatever closes it before the clock's next tick
	}
	return []events.Event{env.event(runID, events.TypeAskTimedOut,
		&events.AskTimedOut{TaskID: t.TaskID, QuestionID: t.Waiting.QuestionID, Reason: reason})}
}

// closeRunQuestions closes the question of every task of run runID parked on one, as the engine clock would at
// its deadline: the question times out and its task resumes (AskExpire). A run's end ends no task; it brings the
// deadline of its questions forward.
func closeRunQuestions(s *projections.State, env *Env, runID string) []events.Event {
	var evs []events.Event
	// NB: the live tasks only (at most the run's bound on them), never every task the run has ended.
	s.EachLiveTask(runID, func(t projections.Task) bool {
		evs = append(evs, expireParked(s, env, runID, t, events.AskReasonRunEnded)...)
		return true
	})
	return evs
}

// expireParked is what AskExpire decides for the question t is parked on, brought forward for reason: the question
// times out and t resumes. It is nil when t is parked on no open question.
func expireParked(s *projections.State, env *Env, runID string, t projections.Task, reason string) []events.Event {
	closing := closeQuestion(s, env, runID, t, reason)
	if closing == nil {
		return nil
	}
	return append(closing, env.event(runID, events.TypeTaskResumed,
		&events.TaskResumed{TaskID: t.TaskID, QuestionID: t.Waiting.QuestionID}))
}
