//go:build !cgo

package daemon

// pebbleOffHeap says whether Pebble allocates its block cache and memtables
// off the Go heap: without cgo they are Go allocations, on the Go heap.
const pebbleOffHeap = false
