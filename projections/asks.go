package projections

import (
	"slices"

	"github.com/crewlog/crewlog/events"
)

// AskStatus is the state of a question (GS-17).
type AskStatus string

// Ask statuses.
const (
	AskPending  AskStatus = "pending"
	AskAnswered AskStatus = "answered"
	AskTimedOut AskStatus = "timedout"
)

// Ask is the read model of a question a task parked on. Times are unix
// milliseconds. Reason is the one its ask.timedout recorded
// (events.AskReason...): why it closed before its deadline; absent for an
// answered question and one that timed out at its deadline.
type Ask struct {
	RunID      string    `json:"runId" msgpack:"runId"`
	TaskID     string    `json:"taskId" msgpack:"taskId"`
	QuestionID string    `json:"questionId" msgpack:"questionId"`
	Question   string    `json:"question" msgpack:"question"`
	Options    []string  `json:"options,omitempty" msgpack:"options"`
	AskedAt    int64     `json:"askedAt" msgpack:"askedAt"`
	Deadline   int64     `json:"deadline" msgpack:"deadline"`
	TimeoutSec int64     `json:"timeoutSec" msgpack:"timeoutSec"`
	Clamped    bool      `json:"clamped" msgpack:"clamped"`
	Status     AskStatus `json:"status" msgpack:"status"`
	ResolvedAt int64     `json:"resolvedAt,omitempty" msgpack:"resolvedAt"`
	Reason     string    `json:"reason,omitempty" msgpack:"reason,omitempty"`
}

// Due reports whether the engine clock must time a out at now (unix ms): it is pending and its deadline is at or
// before now (DueAsks).
func (a *Ask) Due(now int64) bool { return a.Status == AskPending && a.Deadline <= now }

func (a *Ask) clone() *Ask {
	c := *a
	c.Options = cloneSlice(a.Options)
	return &c
}

func (r *runState) addAsk(a *Ask) {
	r.asks[a.QuestionID] = a
	r.askOrder = append(r.askOrder, a.QuestionID)
	r.askPending.appended(a.Status == AskPending)
	if a.Status == AskPending {
		r.pendingAsks = append(r.pendingAsks, a.QuestionID)
	}
}

func applyAsk(r *runState, ev events.Event) {
	at := ev.UnixMilli()
	switch ev.Type {
	case events.TypeAskRequested:
		p := events.PayloadAs[events.AskRequested](ev)
		if p == nil || r.asks[p.QuestionID] != nil {
			return
		}
		r.addAsk(&Ask{
			RunID: r.run.RunID, TaskID: p.TaskID, QuestionID: p.QuestionID, Question: p.Question,
			Options: p.Options, AskedAt: p.AskedAt, Deadline: p.Deadline, TimeoutSec: p.TimeoutSec,
			Clamped: p.Clamped, Status: AskPending,
		})
		// One park slot per run: a newer question takes it.
		r.run.WaitState = &WaitState{TaskID: p.TaskID, QuestionID: p.QuestionID, AskedAt: p.AskedAt}
	case events.TypeAskAnswered:
		if p := events.PayloadAs[events.AskAnswered](ev); p != nil {
			resolveAsk(r, p.TaskID, p.QuestionID, AskAnswered, "", at)
		}
	case events.TypeAskTimedOut:
		if p := events.PayloadAs[events.AskTimedOut](ev); p != nil {
			resolveAsk(r, p.TaskID, p.QuestionID, AskTimedOut, p.Reason, at)
		}
	}
}

func resolveAsk(r *runState, taskID, questionID string, st AskStatus, reason string, at int64) {
	if a := r.asks[questionID]; a != nil && a.Status == AskPending {
		a.Status = st
		a.ResolvedAt = at
		a.Reason = reason
		// NB: pendingAsks lists the pending questions in asking order, so the j-th of them is the j-th pending
		// entry of askOrder; the walk to find it is the one that drops it.
		if j := slices.Index(r.pendingAsks, questionID); j >= 0 {
			r.askPending.settled(r.askPending.kth(j + 1))
			if r.pendingAsks = slices.Delete(r.pendingAsks, j, j+1); len(r.pendingAsks) == 0 {
				r.pendingAsks = nil // as dropFrom leaves a list, and a run loaded from a snapshot has it
			}
		}
	}
	// R4: waitState is cleared only when it points at this task+question.
	if w := r.run.WaitState; w != nil && w.TaskID == taskID && w.QuestionID == questionID {
		r.run.WaitState = nil
	}
}

// Ask returns question questionID of run runID.
func (s *State) Ask(runID, questionID string) (Ask, bool) {
	r := s.run(runID)
	if r == nil || r.asks[questionID] == nil {
		return Ask{}, false
	}
	return *r.asks[questionID].clone(), true
}

// Asks returns the questions of run runID in the order they were asked.
func (s *State) Asks(runID string) []Ask {
	r := s.run(runID)
	if r == nil {
		return nil
	}
	out := make([]Ask, 0, len(r.askOrder))
	for _, id := range r.askOrder {
		out = append(out, *r.asks[id].clone())
	}
	return out
}

// AsksPage returns a page of run runID's questions in the order they were
// asked, only those still pending when pending is set. Total counts the
// questions the filter keeps. It copies only the page's questions.
func (s *State) AsksPage(runID string, pending bool, f PageFilter) (Page[Ask], error) {
	r, err := s.lookupRun(runID)
	if r == nil {
		return Page[Ask]{}, err
	}
	sel := everything(len(r.askOrder))
	if pending {
		sel = pendingIn(&r.askPending)
	}
	return filteredPage(len(r.askOrder), f, sel, func(i int) Ask { return *r.asks[r.askOrder[i]].clone() })
}

// DueAsks returns the pending questions, daemon-wide, whose deadline (unix
// ms) is at or before now: what the engine clock must time out, in run
// creation order then asking order. It walks the pending questions of the
// hot runs without copying them (a cold run has no pending question), not
// every question they have had answered: the engine clock asks at every
// tick, under the published state's lock.
func (s *State) DueAsks(now int64) []Ask {
	var due []*runState
	for _, r := range s.runs {
		for _, qid := range r.pendingAsks {
			if r.asks[qid].Due(now) {
				due = append(due, r)
				break
			}
		}
	}
	slices.SortFunc(due, func(a, b *runState) int { return a.ord - b.ord })
	var out []Ask
	for _, r := range due {
		for _, qid := range r.pendingAsks {
			if a := r.asks[qid]; a.Due(now) {
				out = append(out, *a.clone())
			}
		}
	}
	return out
}

// StrandedAsks returns the questions, daemon-wide, that the engine clock must close before their deadline: the
// pending ones whose task no longer waits on them (it ended, was retried and maybe asked again, its delegation
// settled, or it never parked on them) or whose run has ended, and a closed one its run's waitState still points at.
// Nobody can answer them (wait.resolve answers only the question its task is parked on), and they would hold the
// run's waitState and keep an ended run hot, the last for good. A decision that ends a task or a run closes its
// questions itself; a log written before it did, or an imported history, may hold the pending ones, and a closing
// that named another task than the question's (R4 clears the waitState only for the same task and question) the
// closed one. In run creation order, the closed one first, then asking order; like DueAsks, a walk of the hot runs'
// pending questions.
func (s *State) StrandedAsks() []Ask {
	type strandedRun struct {
		r        *runState
		outlived *Ask // r.parkOutlived()
	}
	var stranded []strandedRun
	for _, r := range s.runs {
		if o := r.parkOutlived(); o != nil || slices.ContainsFunc(r.pendingAsks, r.stranded) {
			stranded = append(stranded, strandedRun{r, o})
		}
	}
	slices.SortFunc(stranded, func(a, b strandedRun) int { return a.r.ord - b.r.ord })
	var out []Ask
	for _, sr := range stranded {
		if sr.outlived != nil {
			out = append(out, *sr.outlived.clone())
		}
		for _, qid := range sr.r.pendingAsks {
			if sr.r.stranded(qid) {
				out = append(out, *sr.r.asks[qid].clone())
			}
		}
	}
	return out
}

// stranded reports whether pending question qid of r is one StrandedAsks returns.
func (r *runState) stranded(qid string) bool {
	if r.run.Status.Stale() {
		return true
	}
	t := r.tasks[r.asks[qid].TaskID]
	return t == nil || !t.ParkedOn(qid)
}

// parkOutlived is the question r's waitState points at when it is no longer pending, else nil.
func (r *runState) parkOutlived() *Ask {
	if w := r.run.WaitState; w != nil {
		if a := r.asks[w.QuestionID]; a != nil && a.Status != AskPending {
			return a
		}
	}
	return nil
}
