package bench

import (
	"fmt"

	"github.com/crewlog/crewlog/cmd/crewbench/bench/plainpebble"
	"github.com/crewlog/crewlog/eventlog"
)

// StorageWork is what a store's Pebble wrote and read since it opened: its WAL, its flushes and its compactions.
// A cell reports it per operation for the stores on Pebble (crewlog in this process and behind its socket, plain
// Pebble), so the background work an admission costs — which the CPU per operation includes but does not name —
// is compared from the same run.
type StorageWork = plainpebble.Work

// storageWorker is a store on Pebble.
type storageWorker interface{ storageWork() (StorageWork, bool) }

func storageWorkOf(st eventlog.StorageStats) StorageWork {
	return StorageWork{WAL: st.WALBytesWritten, Flushed: st.FlushBytes, CompactionRead: st.CompactionBytesRead,
		CompactionWritten: st.CompactionBytesWritten}
}

func (s *engineStore) storageWork() (StorageWork, bool) {
	return storageWorkOf(s.log.StorageStats()), true
}

func (p *pebbleSink) storageWork() (StorageWork, bool) { return p.db.Work(), true }

func (g *groupStore) storageWork() (StorageWork, bool) {
	if w, ok := g.sink.(storageWorker); ok {
		return w.storageWork()
	}
	return StorageWork{}, false
}

func (s *socketStore) storageWork() (StorageWork, bool) {
	st, err := s.srv.stats()
	return st.Storage, err == nil
}

// CellStorage is what a cell's store wrote and read per operation between two readings (nil for a store not on
// Pebble). Flushes and compactions run in the background, so one started before the window and finished in it
// counts, and one the window's writes made due may finish after it: read it over cells of several seconds.
type CellStorage struct {
	Ops  int64
	Work StorageWork // the difference between the readings
}

func storageBetween(before, after StorageWork, ops int64) *CellStorage {
	return &CellStorage{Ops: ops, Work: StorageWork{WAL: after.WAL - before.WAL,
		Flushed: after.Flushed - before.Flushed, CompactionRead: after.CompactionRead - before.CompactionRead,
		CompactionWritten: after.CompactionWritten - before.CompactionWritten}}
}

// String is "storage per operation: WAL 2.5 KB, flushed 2.6 KB, compactions read 3.1 KB and wrote 1.9 KB".
func (c *CellStorage) String() string {
	if c.Ops <= 0 {
		return "storage: no operations"
	}
	kb := func(b uint64) string { return fmt.Sprintf("%.2f KB", float64(b)/float64(c.Ops)/1000) }
	return fmt.Sprintf("storage per operation: WAL %s, flushed %s, compactions read %s and wrote %s", kb(c.Work.WAL),
		kb(c.Work.Flushed), kb(c.Work.CompactionRead), kb(c.Work.CompactionWritten))
}
