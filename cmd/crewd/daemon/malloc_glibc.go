//go:build linux && cgo

package daemon

/*
#include <malloc.h>

static void crewd_set_arena_max(int n) {
#ifdef M_ARENA_MAX
	mallopt(M_ARENA_MAX, n);
#endif
}
*/
import "C"

func setMallocArenas(n int) { C.crewd_set_arena_max(C.int(n)) }
