package projections

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// The slots each task holds with its delegations (runState.slotsHeld), kept by admission and settlement, equal a
// recount of the delegations in flight by the task whose share each counts for, after every event of random
// histories and after a snapshot's round trip; in a history the engine could have decided, that task is the one
// the walk up from the delegation's parent finds at any time (shareHolder), not only at admission.
func TestWorkerSlotCountsEqualARecount(t *testing.T) {
	recount := func(r *runState, holderOf func(d *Delegation) string) map[string]int {
		n := make(map[string]int)
		for _, sub := range r.inFlight {
			n[holderOf(r.dels[sub])]++
		}
		return n
	}
	admitted := func(d *Delegation) string { return d.ShareHolder }
	checked := 0
	for seed := range uint64(100) {
		rng := rand.New(rand.NewPCG(seed, 7))
		s := New()
		for i, ev := range randomHistory(rng, 50+rng.IntN(300)) {
			Apply(s, ev)
			for id, r := range s.runs {
				require.Equal(t, recount(r, admitted), r.slotsHeld, "seed %d, event %d, run %s", seed, i, id)
				checked += len(r.inFlight)
			}
		}
		b, err := EncodeSnapshot(s)
		require.NoError(t, err)
		restored, err := DecodeSnapshot(b)
		require.NoError(t, err)
		for id, r := range restored.runs {
			require.Equal(t, recount(r, admitted), r.slotsHeld, "seed %d, run %s after a snapshot", seed, id)
			require.Equal(t, s.runs[id].slotsHeld, r.slotsHeld, "seed %d, run %s after a snapshot", seed, id)
		}
	}
	require.Positive(t, checked, "no delegation was in flight")

	s := fold(shadowTaskHistory(true))
	r := s.runs["R"]
	walked := func(d *Delegation) string { return r.shareHolder(d.ParentTaskID) }
	require.Equal(t, map[string]int{"a1": 2, "loop": 1}, r.slotsHeld, "gc-1 and gc-2 count for a1")
	require.Equal(t, recount(r, walked), r.slotsHeld)
	holder, held := s.SlotsHeldByWorker("R", "gc-2")
	require.Equal(t, "a1", holder)
	require.Equal(t, 2, held)
}
