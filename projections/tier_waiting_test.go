package projections

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
)

// TestARunGoneColdLeavesTheSlotWaiters: an ended run holding a place among the slot waiters (a refusal recorded after
// its end, as an import writes it) goes cold, and its place leaves memory with it: the waiters are the candidates
// SlotWaiters walks at every slot decision, and a place kept for each such run would grow with the history (that it
// comes back when the run is read back hot: commands.TestAnEndedRunRefusedASlotGoesCold).
func TestARunGoneColdLeavesTheSlotWaiters(t *testing.T) {
	const runs = 20
	var h history
	for i := range runs {
		run := fmt.Sprintf("E%02d", i)
		h.add(run, events.TypeRunCreated, &events.RunCreated{Team: "t"})
		h.add(run, events.TypeRunCompleted, &events.RunCompleted{})
		h.add(run, events.TypeDelegateRejected, &events.DelegateRejected{TaskID: "a",
			Reason: events.ReasonSlotsExhausted})
	}
	l, err := eventlog.Open("db", &eventlog.Options{FS: vfs.NewMem()})
	require.NoError(t, err)
	defer l.Close()
	appendEvents(t, l, h.evs)
	s := fold(h.evs)
	require.Len(t, s.waiting, runs, "each ended run refused a slot holds a place")
	s.SetColdStore(NewColdStore(l, 0))

	cold := s.EvictAll(at(len(h.evs))+1, 0, 0)
	require.Len(t, cold, runs)
	require.Empty(t, s.waiting, "places of the runs gone cold")
}
