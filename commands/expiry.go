package commands

import "github.com/crewlog/crewlog/projections"

// DueExpiries is the engine clock's choice of what expires at now (unix ms):
// a delegate.expire for every in-flight delegation past its deadline plus
// the settle grace (ExpiresAt), in the order InFlight gives, then an
// ask.expire for every pending question past its deadline, then one for
// every other question the clock closes before its deadline (StrandedAsks).
// It is pure, so Engine.Tick and the scenario runner make the same choice.
func DueExpiries(s *projections.State, now int64) []Command {
	var due []Command
	cfg := s.Config()
	for _, d := range s.InFlight() {
		if ExpiresAt(d, cfg) <= now {
			due = append(due, &DelegateExpire{RunID: d.RunID, SubID: d.SubID})
		}
	}
	for _, a := range s.DueAsks(now) {
		due = append(due, &AskExpire{RunID: a.RunID, QuestionID: a.QuestionID})
	}
	for _, a := range s.StrandedAsks() {
		if !a.Due(now) { // NB: a due one is one DueAsks gave
			due = append(due, &AskExpire{RunID: a.RunID, QuestionID: a.QuestionID})
		}
	}
	return due
}
