package daemon

import (
	"context"
	"os"
	"time"
)

// mallocArenas is how many glibc malloc arenas crewd lets its threads use.
//
// Why: Pebble allocates its block cache and memtables with C's malloc (when
// built with cgo), from whichever threads read and flush. glibc gives each
// thread that meets contention an arena of its own (up to 8 per core), and
// memory freed in one arena (a block evicted from the cache) is not reused by
// another, so the resident set grows well past what Pebble holds: measured on
// crewbench history at 1M events, the peak while serving finished runs was
// 339 MiB with 2 arenas against 439 MiB with the default, for the same cache.
const mallocArenas = 2

// limitMallocArenas caps glibc's malloc arenas at mallocArenas, unless
// MALLOC_ARENA_MAX says otherwise (glibc read it at start). A no-op without
// cgo (Pebble then allocates on the Go heap) or glibc.
func limitMallocArenas() {
	if _, set := os.LookupEnv("MALLOC_ARENA_MAX"); set {
		return
	}
	setMallocArenas(mallocArenas)
}

// mallocTrimEvery is how often crewd returns the free pages of its malloc
// arenas to the system while it serves.
//
// Why: Pebble's block cache allocates and frees a block for every miss, and
// it gives up its memtables' share of the cache whenever writes arrive, so
// the arenas keep freed blocks mapped, scattered between live ones, where
// glibc never returns them (it only trims an arena's top). How much depends
// on how many blocks passed through the cache, which grows with the store
// (measured in docs/benchmarks.md, "crewd's peak memory while writing
// through a snapshot"). A trim every few seconds bounds that by what churns
// between two trims, as the Go runtime's scavenger does for the Go heap.
// It costs a walk of the arenas' free chunks (a few milliseconds; measured
// 5–15 ms with 80 MB free) every mallocTrimEvery.
const mallocTrimEvery = 2 * time.Second

// trimMallocUntil trims the malloc arenas every mallocTrimEvery until ctx
// ends.
func trimMallocUntil(ctx context.Context) {
	t := time.NewTicker(mallocTrimEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			trimMalloc()
		}
	}
}
