//go:build !(linux && cgo)

package daemon

func setMallocArenas(int) {}

func setMallocMmapThreshold(int) {}

func trimMalloc() {}
