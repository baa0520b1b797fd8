package projections

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPendingIndexMatchesItsFlags appends and settles entries at random and requires the index's answers to be what
// a walk of the flags gives, at every ordinal, after every change; and an index built from the final flags alone (a
// snapshot's) to be the same index.
func TestPendingIndexMatchesItsFlags(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 7))
	var x pendingIndex
	var flags []bool
	for step := range 600 {
		if rng.IntN(3) > 0 || len(flags) == 0 {
			p := rng.IntN(4) > 0
			flags = append(flags, p)
			x.appended(p)
		} else if i := rng.IntN(len(flags)); flags[i] {
			flags[i] = false
			x.settled(i)
		}
		var pending []int
		for i, p := range flags {
			if p {
				pending = append(pending, i)
			}
		}
		require.Equal(t, len(pending), x.pending, "step %d", step)
		for k := 1; k <= len(pending)+1; k++ {
			want := len(flags)
			if k <= len(pending) {
				want = pending[k-1]
			}
			require.Equal(t, want, x.kth(k), "step %d kth(%d)", step, k)
		}
		for from := 0; from <= len(flags); from++ {
			before, next := 0, len(flags)
			for _, i := range pending {
				if i < from {
					before++
				} else if next == len(flags) {
					next = i
				}
			}
			require.Equal(t, before, x.before(from), "step %d before(%d)", step, from)
			require.Equal(t, next, x.next(from), "step %d next(%d)", step, from)
		}
	}
	var fresh pendingIndex
	for _, p := range flags {
		fresh.appended(p)
	}
	require.Equal(t, fresh, x)
}
