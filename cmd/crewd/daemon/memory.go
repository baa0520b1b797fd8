package daemon

import (
	"log/slog"
	"runtime/debug"
)

// DefaultMemoryMiB is --memory-mib's default: the resident memory crewd aims
// to stay within, below the 300 MB a store of 10M events in 10,000 finished
// runs and 10 active ones must fit in while it writes through a snapshot.
const DefaultMemoryMiB = 256

// maxMemoryMiB bounds --memory-mib (1 TiB).
const maxMemoryMiB = 1 << 20

// memoryOverhead is the part of crewd's resident memory that is neither the
// Go heap nor Pebble's cache and memtables: the binary's resident pages
// (≈ 25 MiB) and malloc's own bookkeeping.
const memoryOverhead = 32 << 20

// minGoMemoryLimit is the lowest soft limit --memory-mib sets on the Go
// heap, however little the flags leave it: below it the collector would run
// all the time for an engine holding only a few active runs.
const minGoMemoryLimit = 64 << 20

// goMemoryLimit is the Go runtime's soft memory limit for c (0: none): what
// --memory-mib leaves once the store's cache, its memtables (the two Pebble
// reserves in the cache and one being flushed) and memoryOverhead are taken
// out, and at least minGoMemoryLimit.
//
// Why a limit: with GOGC=100 the heap may grow to twice what was live at the
// last collection, and a snapshot (the clone of the active state, its
// encoding) is live when the collector measures it, so the heap's goal
// doubles that too. A soft limit makes the collector run earlier as the
// heap nears it rather than let the heap double; the active state itself is
// never refused memory (a heap that must exceed the limit does: the
// collector then runs often, at most about half the CPU, until it shrinks).
func goMemoryLimit(c Config) int64 {
	if c.MemoryBytes == 0 {
		return 0
	}
	return max(c.MemoryBytes-c.CacheBytes-3*int64(c.MemTableBytes)-memoryOverhead, minGoMemoryLimit)
}

// applyMemoryLimit sets the Go runtime's soft memory limit from c, unless
// GOMEMLIMIT (read by the runtime at start) says otherwise.
func applyMemoryLimit(c Config, getenv func(string) string, lg *slog.Logger) {
	if getenv("GOMEMLIMIT") != "" {
		lg.Info("Go memory limit from GOMEMLIMIT; --memory-mib not applied", "GOMEMLIMIT", getenv("GOMEMLIMIT"))
		return
	}
	if limit := goMemoryLimit(c); limit > 0 {
		debug.SetMemoryLimit(limit)
		lg.Info("Go memory limit", "mib", limit>>20, "memoryMiB", c.MemoryBytes>>20)
	}
}
