package projections

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// TestEvictableAfterTheRetention: an ended run may go cold once its last event is the retention old, not a
// millisecond before; a run that holds a slot, is parked on a question, has a question pending or has not ended stays
// hot whatever its age.
func TestEvictableAfterTheRetention(t *testing.T) {
	const retention = 60_000
	var h history
	for _, run := range []string{"A", "B", "C", "D", "E"} {
		h.add(run, events.TypeRunCreated, &events.RunCreated{Team: "t"})
	}
	h.add("B", events.TypeDelegateAdmitted, &events.DelegateAdmitted{TaskID: "t", SubID: "gc-b"})
	h.add("C", events.TypeAskRequested, &events.AskRequested{TaskID: "t", QuestionID: "q"})
	// E's first question is still pending, though its park went to the second, since answered.
	h.add("E", events.TypeAskRequested, &events.AskRequested{TaskID: "t", QuestionID: "q1"})
	h.add("E", events.TypeAskRequested, &events.AskRequested{TaskID: "t", QuestionID: "q2"})
	h.add("E", events.TypeAskAnswered, &events.AskAnswered{TaskID: "t", QuestionID: "q2"})
	for _, run := range []string{"B", "C", "E", "A"} { // A last: at its retention the others are past theirs
		h.add(run, events.TypeRunCompleted, &events.RunCompleted{})
	}
	s := fold(h.evs)
	s.SetColdStore(NewColdStore(nil, 0))
	a, _ := s.Run("A")
	ended := a.UpdatedAt
	require.Empty(t, s.Evictable(ended+retention-1, retention, 0), "within the retention")
	require.Equal(t, []string{"A"}, s.Evictable(ended+retention, retention, 0),
		"A, at the retention; B holds a slot, C is parked, E has a pending question, D has not ended")
}
