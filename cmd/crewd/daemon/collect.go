package daemon

import (
	"runtime"
	"runtime/debug"
	"time"

	"github.com/crewlog/crewlog/broker/httpapi"
)

// engineObserver is the engine's observer in crewd: the HTTP API's metrics,
// and a garbage collection once each snapshot is saved.
//
// Why: a snapshot is when crewd's memory peaks. The collector cycle that
// runs while it is encoded counts the clone of the state and the snapshot's
// bytes as live, and lets the heap grow to twice that (GOGC=100) before the
// next cycle, long after both are garbage. Collecting once they are lets
// the heap's goal fall back to twice the active state. Measured on
// crewbench history at 10M events: see docs/design-read-models.md ("Where
// the memory goes"). One collection per snapshot (at least SnapshotEvery
// events), on the snapshot's goroutine, off the write path.
type engineObserver struct{ *httpapi.Metrics }

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
