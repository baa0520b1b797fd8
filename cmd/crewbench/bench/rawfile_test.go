package bench

import (
	"sync"
	"testing"

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
	// The fill ahead is held: the groups up to the end of the first chunk are written meanwhile, none waiting
	// for it.
	held := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(held) }) }
	defer release() // NB: before the deferred Close, which waits for the fill: a failed require must not hang
	f.beforeFill = func() { <-held }
	opsUntil(chunk - 2<<10)
	require.Equal(t, int64(chunk), f.zeroFilled(), "the fill ahead is held")
	f.mu.Lock()
	filling := f.filling
	f.mu.Unlock()
	require.NotNil(t, filling, "the next chunk's fill started once half of the first was used")
	release()
	<-filling
	require.Equal(t, int64(2*chunk), f.zeroFilled())
	// Past the first chunk and on, every group is written whole and reads back.
	opsUntil(3 * chunk)
	final, err := g.Final(ctx)
	require.NoError(t, err)
	require.Empty(t, checkTimed(final, runs, int64(ops)))
}
