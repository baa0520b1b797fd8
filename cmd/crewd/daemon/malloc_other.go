//go:build !(linux && cgo)

package daemon

func setMallocArenas(int) {}

// mallocTrims is false: without cgo (or off Linux) there are no malloc
// arenas of crewd's to trim.
const mallocTrims = false

func trimMalloc() {}
