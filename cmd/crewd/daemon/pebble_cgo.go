//go:build cgo

package daemon

// pebbleOffHeap says whether Pebble allocates its block cache and memtables
// off the Go heap: with cgo it takes them from C's malloc.
const pebbleOffHeap = true
