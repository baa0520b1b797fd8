package broker

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/commands"
)

// roomAbove is a SpaceForGuard whose disk has room bytes above its minimum; it records the writes it was asked about.
type roomAbove struct {
	mu    sync.Mutex
	room  uint64
	asked []uint64
}

var _ commands.SpaceForGuard = (*roomAbove)(nil)

func (g *roomAbove) CheckSpace() error { return nil }

func (g *roomAbove) CheckSpaceFor(size uint64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked = append(g.asked, size)
	if size > g.room {
		return fmt.Errorf("test: %d bytes above the minimum, too little for %d", g.room, size)
	}
	return nil
}

// TestAdminCheckpointWithoutRoomIsRefused: admin.checkpoint wrote its copy whatever the disk held, where every other
// write the daemon makes beside the log (a snapshot, a view) asks the space guard first. On the store's file system
// the copy of the write-ahead logs and MANIFEST could take the reserve the log needs, and the log's next write then
// failed and stopped crewd; on another, the copy of the whole store filled that disk before it failed. It is refused
// disk-full, before anything is written, unless the copy leaves the store's disk above the minimum and fits in the
// free space of its own.
func TestAdminCheckpointWithoutRoomIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		room  uint64                   // above the store's minimum
		free  func(need uint64) uint64 // of dir's file system, for a checkpoint that writes need there
		fails string                   // the answer's message holds it; "" for a checkpoint written
	}{
		{"room", 1 << 40, func(need uint64) uint64 { return need }, ""},
		{"the store's reserve", 0, func(uint64) uint64 { return 1 << 40 }, "above the minimum"},
		{"the destination's free space", 1 << 40, func(need uint64) uint64 { return need - 1 },
			"too little for the checkpoint's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &roomAbove{room: tc.room}
			f := newFixture(t, fixtureOpts{disk: true, space: g})
			f.seed()
			a := f.dial()
			a.helloAdmin()
			parent := t.TempDir()
			dir := filepath.Join(parent, "copy")
			needs, err := f.log.CheckpointNeeds(dir)
			require.NoError(t, err)
			require.True(t, needs.StoreFS)
			require.Positive(t, needs.Bytes)
			replaceFreeSpace(t, func(string) (uint64, error) { return tc.free(needs.Bytes), nil })

			if tc.fails == "" {
				a.ok(methodAdminCheckpoint, map[string]any{"dir": dir})
				require.DirExists(t, dir)
				require.Len(t, g.asked, 1, "the store's guard is asked for the copy")
				require.GreaterOrEqual(t, g.asked[0], needs.Bytes)
				return
			}
			e := a.fails(methodAdminCheckpoint, map[string]any{"dir": dir}, wire.CodeDiskFull)
			require.Contains(t, e.Message, tc.fails)
			require.Contains(t, e.Message, methodAdminCheckpoint)
			entries, err := os.ReadDir(parent)
			require.NoError(t, err)
			require.Empty(t, entries, "nothing is written")
			a.ok("ping", nil) // the connection and the daemon go on
		})
	}
}

// replaceFreeSpace answers freeSpace with f until t ends.
func replaceFreeSpace(t *testing.T, f func(dir string) (uint64, error)) {
	was := freeSpaceStub.Swap(&f)
	t.Cleanup(func() { freeSpaceStub.Store(was) })
}
