//go:build linux && cgo

package daemon

/*
#include <malloc.h>

static void crewd_set_arena_max(int n) {
#ifdef M_ARENA_MAX
	mallopt(M_ARENA_MAX, n);
#endif
}

static void crewd_trim(void) {
	malloc_trim(0);
}
*/
import "C"

func setMallocArenas(n int) { C.crewd_set_arena_max(C.int(n)) }

// trimMalloc returns the whole free pages of every malloc arena to the
// system (malloc_trim), not only those at an arena's top. It walks every
// arena's free chunks under the arena's lock: milliseconds, during which
// other threads' allocations from that arena wait.
func trimMalloc() { C.crewd_trim() }
