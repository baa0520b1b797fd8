package projections

import (
	"fmt"
	"testing"
	"time"

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
// had answered or timed out. It walked every question of every hot run. The walk reads without allocating, so its
// time tells: the least of a few rounds, against a bound that a walk of 100,000 questions passes many times over.
func TestDueAsksWalksThePendingAlone(t *testing.T) {
	cost := func(answered int) time.Duration {
		s := fold(askedHistory(answered).evs)
		due := s.DueAsks(at(1))
		require.Len(t, due, 1)
		require.Equal(t, "q-due", due[0].QuestionID)
		require.Len(t, s.DueAsks(at(0)+3_600_000), 2)
		return leastTime(func() { s.DueAsks(at(1)) })
	}
	few, many := cost(0), cost(100_000)
	require.Less(t, many, 10*few+50*time.Microsecond, "%v a tick with 100,000 questions answered, %v with none",
		many, few)
}

// leastTime is the time f takes, the least of a few rounds: a stall of the machine lengthens a round, never shortens
// it.
func leastTime(f func()) time.Duration {
	const rounds, calls = 5, 20
	least := time.Duration(1 << 62)
	for range rounds {
		start := time.Now()
		for range calls {
			f()
		}
		least = min(least, time.Since(start)/calls)
	}
	return least
}
