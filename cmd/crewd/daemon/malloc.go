package daemon

import "os"

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
