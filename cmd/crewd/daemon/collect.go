package daemon

import (
	"runtime"
	"runtime/debug"
	"time"

	"github.com/crewlog/crewlog/broker/httpapi"
)

// engineObserver is the engine's observer in crewd: the HTTP API's metrics,
// C's freed memory returned before each snapshot, and a garbage collection
// once each snapshot is saved.
//
// Why: a snapshot is when crewd's memory peaks. Before it starts, the malloc
// arenas hold what Pebble freed since the last one (blocks evicted from its
// cache when memtables took their place, the churn of reading finished
// runs), mapped and unused, more the larger the store (measured in
// docs/benchmarks.md, "crewd's peak memory while writing through a
// snapshot"). Trimming them first keeps that out of the peak. After it,
// the collector cycle that ran while it was encoded counted the copy of
// the active runs' records and the snapshot's bytes as live, and lets
// the heap grow to twice that (GOGC=100) before the next cycle, long after
// both are garbage. Collecting once they are lets the heap's goal fall back
// to twice the active state. One trim and one collection per snapshot (at
// least SnapshotEvery events), on the snapshot's goroutine, off the write
// path.
type engineObserver struct{ *httpapi.Metrics }

func (o engineObserver) SnapshotStarting() { trimMalloc() }

func (o engineObserver) Snapshotted(position uint64, bytes int, at time.Time) {
	o.Metrics.Snapshotted(position, bytes, at)
	runtime.GC()
}

// releaseStartup collects the garbage of opening the store and returns the
// freed memory to the system at once. Why: rebuilding the state decodes the
// snapshot (a summary per run ever seen) and folds the tail, and the heap
// those passes grew to stays mapped — the collector hands it back only
// slowly — so the RSS once ready would follow the history, not the live
// state. Once, at start, before crewd serves.
func releaseStartup() { debug.FreeOSMemory() }
