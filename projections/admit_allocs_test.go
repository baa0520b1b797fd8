package projections

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// Both folds of every admission (the writer's and the publisher's) create its delegation and its shadow task, which
// the run keeps together: one allocation holds both. The run's slices and maps grow now and then beside it.
func TestFoldingAnAdmissionAllocatesOnce(t *testing.T) {
	var h history
	fixture(&h, 0, true)
	const warm, measured = 1000, 100
	for i := range warm + measured + 1 {
		admitBatch(&h, fmt.Sprintf("gc-%05d", i), 0, false, 0)
	}
	perSub := (len(h.evs) - 4) / (warm + measured + 1)
	s := fold(h.evs[:4+warm*perSub])
	rest := h.evs[4+warm*perSub:]
	n := testing.AllocsPerRun(measured, func() {
		for _, ev := range rest[:perSub] {
			Apply(s, ev)
		}
		rest = rest[perSub:]
	})
	require.Len(t, s.Delegations(runR), warm+measured+1, "every admission folded")
	d, ok := s.Delegation(runR, "gc-01000")
	require.True(t, ok)
	require.Equal(t, events.DelegateAgent, s.Tasks(runR)[1+1000].Agent)
	require.Equal(t, "gc-01000", d.SubID)
	require.LessOrEqual(t, n, float64(1))
}
