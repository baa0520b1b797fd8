//go:build crewlog_plantedbug

package commands

// answerBeforeCommit plants a known bug, in test builds tagged
// crewlog_plantedbug only: the writer answers an admission or a settlement
// as soon as its group is decided, before the append is synced and before
// readers see it. The linearizability checker of integration/ must flag such
// a build (a read that starts after an acknowledged admission and does not
// see it).
const answerBeforeCommit = true

// answerEarly answers group's admissions and settlements that are not
// answered as another command (follow); publish then leaves them alone.
func answerEarly(group []*pending) {
	for _, p := range group {
		switch p.req.Command.(type) {
		case *DelegateRequest, *DelegateSettle:
			if p.follow == nil && p.reply.Rejected == nil {
				p.early = true
				close(p.done)
			}
		}
	}
}
