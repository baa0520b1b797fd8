package daemon

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
)

// spaceCheckInterval is how often the free space is read at most: statfs is cheap, but not free at every command.
const spaceCheckInterval = 100 * time.Millisecond

// spaceGuard is the engine's commands.SpaceGuard: it refuses writes while the file system of the store (of the data
// directory before the store exists) has less free space than min, so a full disk is met by a clear disk-full answer
// and not by a Pebble write error, which stops the engine. It reads the space available to an unprivileged user
// (statfs f_bavail), a little less than root may use.
//
// Concurrency: CheckSpace is safe from any goroutine; one caller refreshes the reading at a time.
type spaceGuard struct {
	dir      string
	min      uint64
	lg       *slog.Logger
	now      func() time.Time
	readFree func(dir string) (uint64, error) // freeBytes; tests read a free space of their choosing

	free    atomic.Uint64
	checked atomic.Int64 // unix nanoseconds of the last reading
	mu      sync.Mutex   // held by the refreshing caller
	low     bool         // the last reading was below min (guarded by mu), to log transitions once
}

// NB: the engine asks a snapshot's room of a guard that has CheckSpaceFor, and of any other only CheckSpace.
var _ commands.SpaceForGuard = (*spaceGuard)(nil)

// newSpaceGuard reads the free space of dir once; a failure is an error, since crewd cannot then know whether it
// may write.
func newSpaceGuard(dir string, min uint64, lg *slog.Logger) (*spaceGuard, error) {
	g := &spaceGuard{dir: dir, min: min, lg: lg, now: time.Now, readFree: freeBytes}
	free, err := g.readFree(dir)
	if err != nil {
		return nil, err
	}
	g.free.Store(free)
	g.checked.Store(g.now().UnixNano())
	g.low = free < min
	return g, nil
}

// freeBytes is the space of dir's file system available to an unprivileged user.
func freeBytes(dir string) (uint64, error) {
	if free, ok := faultFree(); ok {
		return free, nil // a test build's full disk (disk_faults.go)
	}
	free, err := eventlog.FreeSpace(dir)
	if err != nil {
		return 0, fmt.Errorf("daemon: free space of %s: %w", dir, err)
	}
	return free, nil
}

// CheckSpace returns an error while the free space is below the minimum.
func (g *spaceGuard) CheckSpace() error {
	// NB: the reading's age is on the wall clock, which may step back; a negative age reads again at once, where
	// waiting for the clock to come back kept a stale reading (a full disk freed since, or a free one filled) for
	// as long as the step.
	now := g.now().UnixNano()
	if age := now - g.checked.Load(); (age >= int64(spaceCheckInterval) || age < 0) && g.mu.TryLock() {
		g.refresh(now)
		g.mu.Unlock()
	}
	if free := g.free.Load(); free < g.min {
		return g.shortage(free)
	}
	return nil
}

// CheckSpaceFor returns an error unless a write of size bytes leaves at least the minimum free (the engine's
// commands.SpaceForGuard, asked before a snapshot is written). NB: it reads the free space afresh: it is asked once
// before a write of up to tens of megabytes, and a reading spaceCheckInterval old may be that far off.
func (g *spaceGuard) CheckSpaceFor(size uint64) error {
	g.mu.Lock()
	g.refresh(g.now().UnixNano())
	g.mu.Unlock()
	if free := g.free.Load(); free < g.min || free-g.min < size {
		// NB: the write's size rounded up: rounded down, a write under a MiB read "a write of 0 MiB".
		mib := size >> 20
		if size&(1<<20-1) != 0 {
			mib++
		}
		return fmt.Errorf("daemon: %d MiB free on the store's file system, too little for a write of %d MiB "+
			"above the minimum of %d MiB", free>>20, mib, g.min>>20)
	}
	return nil
}

// refresh reads the free space again; the caller holds mu. A failed read keeps the last reading: a statfs error
// says nothing about the space, and refusing every write for it would be worse.
func (g *spaceGuard) refresh(now int64) {
	g.checked.Store(now)
	free, err := g.readFree(g.dir)
	if err != nil {
		g.lg.Warn("free space unknown; keeping the last reading", "err", err)
		return
	}
	g.free.Store(free)
	switch low := free < g.min; {
	case low && !g.low:
		g.lg.Error("disk nearly full: refusing writes (disk-full) until space is freed", "dir", g.dir,
			"freeMiB", free>>20, "minFreeMiB", g.min>>20)
	case !low && g.low:
		g.lg.Warn("disk space is back: accepting writes", "dir", g.dir, "freeMiB", free>>20)
	}
	g.low = free < g.min
}

func (g *spaceGuard) shortage(free uint64) error {
	return fmt.Errorf("daemon: %d MiB free on the store's file system, below the minimum of %d MiB",
		free>>20, g.min>>20)
}
