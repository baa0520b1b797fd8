package eventlog

import (
	"log/slog"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// StorageStats is what the storage engine under the log is doing, for an operator's metrics: the signs that the
// disk or the background work cannot keep up (level 0 growing, compaction debt, write stalls) and what the store
// holds. Counters run from Open; gauges are read when StorageStats is called.
type StorageStats struct {
	// L0Files and L0Sublevels are level 0's tables and sublevels. Every read that misses the memtables checks each
	// sublevel, and Pebble stalls writes once there are too many: a count that keeps growing means compactions are
	// behind the writes.
	L0Files, L0Sublevels int64
	// CompactionDebtBytes estimates the bytes compactions must rewrite before the tree is back in shape.
	CompactionDebtBytes uint64
	// Compactions and Flushes count the compactions and memtable flushes finished since Open.
	Compactions, Flushes int64
	// WALBytesWritten is the bytes written to the write-ahead log since Open.
	WALBytesWritten uint64
	// FlushBytes is the bytes flushes wrote to tables since Open; CompactionBytesRead and CompactionBytesWritten
	// the bytes compactions read and wrote. Per byte the WAL took, they are the background work every write costs
	// in the end.
	FlushBytes, CompactionBytesRead, CompactionBytesWritten uint64
	// DiskBytes is the space the store's tables and write-ahead logs take on disk.
	DiskBytes uint64
	// WriteStalls counts the times since Open that Pebble held writes back because flushes or compactions were
	// behind; WriteStallTime is how long they lasted in all (a stall still going on included).
	WriteStalls    int64
	WriteStallTime time.Duration
	// OutcomeFilterBytes is the memory of the filter that proves new command ids unrecorded (outcome_filter.go):
	// 2 bytes per outcome in the store, the one part of the log's memory that grows with its history.
	OutcomeFilterBytes int64
}

// StorageStats reads the storage engine's counters and gauges. It takes Pebble's metrics (a few locks, no I/O), so
// it suits a scrape, not a hot path.
func (l *Log) StorageStats() StorageStats {
	m := l.db.Metrics()
	st := StorageStats{
		L0Files:             m.Levels[0].TablesCount,
		L0Sublevels:         int64(m.Levels[0].Sublevels),
		CompactionDebtBytes: m.Compact.EstimatedDebt,
		Compactions:         m.Compact.Count,
		Flushes:             m.Flush.Count,
		WALBytesWritten:     m.WAL.BytesWritten,
		DiskBytes:           diskBytes(m),
	}
	for i := range m.Levels {
		st.FlushBytes += m.Levels[i].TableBytesFlushed
		st.CompactionBytesRead += m.Levels[i].TableBytesRead
		st.CompactionBytesWritten += m.Levels[i].TableBytesCompacted
	}
	st.WriteStalls, st.WriteStallTime = l.stalls.read(time.Now())
	// NB: without l.mu, which an append holds while Pebble holds it back: a scrape during a write stall waited for
	// its end, and one after a flush that failed then, the append held for good, waited for good, and so did the
	// close of the server it came to (crewd's exit).
	st.OutcomeFilterBytes = l.filter.bytes()
	return st
}

// diskBytes is the space the store's tables and write-ahead logs take on disk, as m says.
func diskBytes(m *pebble.Metrics) uint64 {
	b := m.DiskSpaceUsage()
	// NB: Pebble counts the WAL being written at its size when it was opened (zero, or a recycled file's), so a store
	// that has not flushed yet would look almost empty; its logical size is what it holds.
	if m.WAL.Size > m.WAL.PhysicalSize {
		b += m.WAL.Size - m.WAL.PhysicalSize
	}
	return b
}

// writeStalls counts Pebble's write stalls from its event listener, and logs them: at the first, and then at most
// once per stallLogEvery, with the count since the last line, so a store stalling all the time does not flood the
// log.
type writeStalls struct {
	lg *slog.Logger

	mu      sync.Mutex
	count   int64
	began   time.Time     // zero when no stall is going on
	total   time.Duration // of the stalls that ended
	logged  time.Time     // when a stall was last logged
	unnamed int64         // stalls since then not logged
}

// stallLogEvery bounds how often a write stall is logged.
const stallLogEvery = time.Minute

func newWriteStalls(lg *slog.Logger) *writeStalls { return &writeStalls{lg: lg} }

// listener is the Pebble event listener that feeds s.
func (s *writeStalls) listener() *pebble.EventListener {
	return &pebble.EventListener{
		WriteStallBegin: func(info pebble.WriteStallBeginInfo) { s.begin(time.Now(), info.Reason) },
		WriteStallEnd:   func() { s.end(time.Now()) },
	}
}

func (s *writeStalls) begin(now time.Time, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count++
	if s.began.IsZero() {
		s.began = now
	}
	if !s.logged.IsZero() && now.Sub(s.logged) < stallLogEvery {
		s.unnamed++
		return
	}
	s.lg.Warn("eventlog: the storage engine holds writes back until its flushes and compactions catch up",
		"reason", reason, "stalls_since_last_line", s.unnamed)
	s.logged, s.unnamed = now, 0
}

func (s *writeStalls) end(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.began.IsZero() {
		s.total += now.Sub(s.began)
		s.began = time.Time{}
	}
}

// read returns the stalls counted and their time, up to now for one going on.
func (s *writeStalls) read(now time.Time) (int64, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.total
	if !s.began.IsZero() {
		d += now.Sub(s.began)
	}
	return s.count, d
}
