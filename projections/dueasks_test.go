package projections

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// askedHistory is run R whose task P asked answered questions, each answered, then two still pending: one due at
// at(0) and one due an hour later.
func askedHistory(answered int) *history {
	h := &history{}
	fixture(h, 0, true)
	ask := func(id string, deadline int64) {
		h.add(runR, events.TypeAskRequested, &events.AskRequested{TaskID: taskP, QuestionID: id, Question: "q?",
			AskedAt: at(len(h.evs) + 1), Deadline: deadline, TimeoutSec: 60})
	}
	for i := range answered {
		id := fmt.Sprintf("q-old-%06d", i)
		ask(id, at(0))
		h.add(runR, events.TypeAskAnswered, &events.AskAnswered{TaskID: taskP, QuestionID: id})
	}
	ask("q-due", at(0))
	ask("q-later", at(0)+3_600_000)
	return h
}

// TestDueAsksWalksThePendingAlone: the engine clock asks for the questions due at every tick, under the published
// state's lock that the publisher waits for; the answer walks the questions still pending, however many the run has
// had answered or timed out. It walked every question of every hot run. The answered questions' records are taken
// out of the run before it is asked, so a walk that reads one dereferences nil and fails the test.
func TestDueAsksWalksThePendingAlone(t *testing.T) {
	s := fold(askedHistory(1000).evs)
	r := s.runs[runR]
	require.Len(t, r.pendingAsks, 2, "the run keeps its two pending questions apart")
	for id := range r.asks {
		if strings.HasPrefix(id, "q-old-") {
			r.asks[id] = nil
		}
	}
	due := s.DueAsks(at(1))
	require.Len(t, due, 1)
	require.Equal(t, "q-due", due[0].QuestionID)
	require.Len(t, s.DueAsks(at(0)+3_600_000), 2)

	// Whether an ended run may go cold reads its pending questions alone too. NB: the run ended and its park slot
	// freed (q-later answered), or mayEvict answers before it looks at the questions.
	h := askedHistory(1000)
	h.add(runR, events.TypeAskAnswered, &events.AskAnswered{TaskID: taskP, QuestionID: "q-later"})
	h.add(runR, events.TypeRunCompleted, &events.RunCompleted{Summary: "done"})
	ended := fold(h.evs)
	r = ended.runs[runR]
	require.Nil(t, r.run.WaitState)
	for id := range r.asks {
		if strings.HasPrefix(id, "q-old-") {
			r.asks[id] = nil
		}
	}
	require.False(t, ended.mayEvict(r), "an ended run with a question pending stays hot")
	h.add(runR, events.TypeAskAnswered, &events.AskAnswered{TaskID: taskP, QuestionID: "q-due"})
	answered := fold(h.evs)
	require.True(t, answered.mayEvict(answered.runs[runR]), "and may go cold once none is")
}
