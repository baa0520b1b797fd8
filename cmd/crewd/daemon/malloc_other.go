//go:build !(linux && cgo)

package daemon

func setMallocArenas(int) {}

func trimMalloc() {}
