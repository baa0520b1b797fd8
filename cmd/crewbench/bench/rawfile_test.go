package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRawFileGrowsAhead: the physical limit zero-fills its next chunk before a group needs it, so no group waits
// for a chunk's zero-fill and sync in the window. Grown in line, the 256 MiB chunk took 0.7 s on a 2-core VM,
// where the file at 64 clients fills one in some 3.5 s: a cell of the default 5 s stalled the physical limit for
// a seventh of its window, and crewlog's ratio to it gained as much.
func TestRawFileGrowsAhead(t *testing.T) {
	const chunk = 256 << 10
	f, err := openRawFileChunk(t.TempDir(), chunk)
	require.NoError(t, err)
	g := newGroupStore(f)
	defer g.Close()
	ctx := t.Context()
	runs := []string{"run-0"}
	require.NoError(t, g.Setup(ctx, runs, Spec{Budget: timedBudget, Slots: timedSlots, Clients: 1}))
	ops := 0
	opsUntil := func(end int64) {
		for f.end < end {
			a, err := g.Admit(ctx, "run-0", timedTokens)
			require.NoError(t, err)
			require.NoError(t, g.Settle(ctx, "run-0", a.SubID, "ok"))
			ops++
		}
	}
	opsUntil(chunk/2 + 1)
	require.Eventually(t, func() bool { return f.zeroFilled() >= 2*chunk }, 5*time.Second, 5*time.Millisecond,
		"the next chunk is zero-filled once half of the last is used, before a group needs it")
	// Past the first chunk and on, every group is written whole and reads back.
	opsUntil(3 * chunk)
	final, err := g.Final(ctx)
	require.NoError(t, err)
	require.Empty(t, checkTimed(final, runs, int64(ops)))
}
