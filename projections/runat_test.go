package projections

import (
	"context"
	"math"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// endingCtx is a context that has ended from its ends-th look (Err) on, counting the looks: a fold cancelled
// after so many of its events, with no timing. Not safe for concurrent use; a fold looks from one goroutine.
type endingCtx struct {
	context.Context
	ends  int // the look from which Err answers err; 0: never
	err   error
	looks int
}

func (c *endingCtx) Err() error {
	c.looks++
	if c.ends > 0 && c.looks >= c.ends {
		return c.err
	}
	return nil
}

// TestRunAtStopsWhenItsContextEnds: a fold looks at its context before it starts and every 256 events of the run
// (foldCheckEvery), and once the context has ended it stops there with the context's error and no state; one whose
// context does not end folds the run whole. From a base too, which it leaves as it was.
func TestRunAtStopsWhenItsContextEnds(t *testing.T) {
	evs := longRunHistory(3*foldCheckEvery + 100)
	l := appendHistory(t, evs)
	run, head := evs[1].Stream, uint64(len(evs))
	runEvents := 0
	for _, ev := range evs {
		if ev.Stream == run {
			runEvents++
		}
	}
	require.Equal(t, len(evs)-1, runEvents, "one run and the engine's configuration")
	whole := 1 + runEvents/foldCheckEvery // every look of a fold to the head

	half := head / 2
	base, ok, err := RunAt(context.Background(), l, run, half)
	require.NoError(t, err)
	require.True(t, ok)
	baseBefore := base.Clone()

	for _, tc := range []struct {
		name  string
		base  *State
		ends  int
		err   error
		looks int // the looks the fold took
		read  int // the events of the run it read, when it stopped
	}{
		{name: "never ends", looks: whole},
		{name: "ended before it starts", ends: 1, err: context.Canceled, looks: 1},
		{name: "cancelled after 256 events", ends: 2, err: context.Canceled, looks: 2, read: 256},
		{name: "past its deadline after 512 events", ends: 3, err: context.DeadlineExceeded, looks: 3, read: 512},
		{name: "from a base, ended before it starts", base: base, ends: 1, err: context.Canceled, looks: 1},
		{name: "from a base, cancelled after 256 events", base: base, ends: 2, err: context.Canceled, looks: 2,
			read: 256},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := &endingCtx{Context: context.Background(), ends: tc.ends, err: tc.err}
			s, ok, err := RunAtFrom(ctx, l, tc.base, run, head)
			require.Equal(t, tc.looks, ctx.looks, "the looks at the context")
			if tc.err == nil {
				require.NoError(t, err)
				require.True(t, ok)
				require.Equal(t, head, s.Position)
				r, _ := s.Run(run)
				require.Equal(t, RunCompleted, r.Status, "folded to the run's end")
				return
			}
			require.ErrorIs(t, err, tc.err)
			var stopped *FoldStoppedError
			require.ErrorAs(t, err, &stopped)
			require.Equal(t, tc.read, stopped.Read, "the events read, for a caller that counts them")
			require.Nil(t, s, "no part of a state")
			require.False(t, ok)
			require.Equal(t, baseBefore, base, "the base is not modified")
		})
	}
}

// AssumePool holds the slots a recorded decision saw beside the run's own as a count: a record's Held is whatever
// its log holds (a decision's is the pool's count, an import or a damaged log may hold any), and the pool made one
// entry for each slot it assumed, so that the explanation of a record holding 2^40 filled memory until the daemon
// ended. The run's own slots are still its own, and the count is the record's: one below them counts none, the least
// int too, where the difference of the two wrapped to the greatest and the pool held a negative count.
func TestAssumePoolCountsTheSlotsItAssumes(t *testing.T) {
	var h history
	fixture(&h, 0, true)
	admitBatch(&h, "gc-1", 0, false, 0)
	for _, c := range []struct{ held, want int }{{1 << 20, 1 << 20}, {3, 3}, {1, 1}, {0, 1}, {-5, 1},
		{math.MinInt, 1}, {math.MaxInt, math.MaxInt}} {
		s := fold(h.evs)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s.AssumePool(c.held, 2)
		runtime.ReadMemStats(&after)
		require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(4<<10), "held %d: allocated", c.held)
		require.Equal(t, c.want, s.SlotsHeld(), "held %d", c.held)
		require.Equal(t, Slots{Held: c.want, Capacity: s.Config().MaxSlots, SubIDs: []string{"gc-1"}}, s.Slots(),
			"held %d", c.held)
		require.Equal(t, 1, s.SlotsHeldBy(runR), "held %d: the run's own", c.held)
		holder, ok := s.SlotHolder("gc-1")
		require.True(t, ok)
		require.Equal(t, runR, holder)
	}
}
