//go:build linux && cgo

package daemon

/*
#include <malloc.h>

static void crewd_set_arena_max(int n) {
#ifdef M_ARENA_MAX
	mallopt(M_ARENA_MAX, n);
#endif
}

static int crewd_can_trim(void) {
#ifdef __GLIBC__
	return 1;
#else
	return 0;
#endif
}

static void crewd_trim(void) {
#ifdef __GLIBC__
	malloc_trim(0);
#endif
}
*/
import "C"

func setMallocArenas(n int) { C.crewd_set_arena_max(C.int(n)) }

// mallocTrims says whether trimMalloc returns anything to the system: only
// glibc has malloc_trim (musl, as on Alpine, has none).
var mallocTrims = C.crewd_can_trim() != 0

// trimMalloc returns the whole free pages of every malloc arena to the
// system (malloc_trim), not only those at an arena's top. It walks every
// arena's free chunks under the arena's lock: milliseconds, during which
// other threads' allocations from that arena wait. A no-op without glibc.
func trimMalloc() { C.crewd_trim() }
