package commands

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
)

// freeSpace is a SpaceGuard that reports free bytes of a disk whose minimum is min, and records the sizes of the
// writes it was asked about.
type freeSpace struct {
	mu    sync.Mutex
	free  uint64
	min   uint64
	sizes []uint64
}

func (g *freeSpace) CheckSpace() error { return g.CheckSpaceFor(0) }

func (g *freeSpace) CheckSpaceFor(size uint64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if size > 0 {
		g.sizes = append(g.sizes, size)
	}
	if g.free < g.min || g.free-g.min < size {
		return fmt.Errorf("test: %d bytes free, below the minimum of %d after %d", g.free, g.min, size)
	}
	return nil
}

func (g *freeSpace) set(free uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.free, g.sizes = free, nil
}

// A snapshot is saved only when the disk has room for it above the minimum, not merely free space above the
// minimum when it starts: a snapshot of a large hot state is tens of megabytes, and one written into the log's
// reserve leaves the log a disk whose next write may fail, which stops the engine. It is measured once encoded,
// before anything is written; with room, it is saved, and the size asked about is the snapshot's.
func TestASnapshotLargerThanTheRoomAboveTheMinimumIsNotSaved(t *testing.T) {
	const min = 256 << 20
	guard := &freeSpace{free: min + 1<<30, min: min}
	l, e, opts := engineWithSnapshotDue(t, guard)
	e.snapping.Store(false)

	guard.set(min + 1<<10) // above the minimum, with 1 KiB of room
	require.NoError(t, e.Close())
	_, err := l.LatestSnapshot()
	require.ErrorIs(t, err, eventlog.ErrNotFound, "a snapshot larger than the room above the minimum was saved")
	require.Len(t, guard.sizes, 1, "the snapshot asked for its own size")
	require.Greater(t, guard.sizes[0], uint64(1<<10))

	guard.set(min + 1<<30)
	e, err = Open(l, opts)
	require.NoError(t, err)
	require.NoError(t, e.Close())
	snap, err := l.LatestSnapshot()
	require.NoError(t, err, "with room, the snapshot due is saved")
	require.Equal(t, []uint64{uint64(len(snap.Data))}, guard.sizes, "the room asked for is the snapshot's size")
}
