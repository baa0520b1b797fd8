package daemon

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The Go heap's soft limit is what --memory-mib leaves beside the binary
// and, when Pebble allocates off the Go heap (cgo), beside the store's cache
// and three memtables; never below minGoMemoryLimit, and none without
// --memory-mib.
func TestGoMemoryLimitIsWhatTheStoreLeaves(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		offHeap bool
		want    int64
	}{
		{"the defaults, cgo", nil, true, (256 - 32 - 3*16 - 32) << 20},
		{"the defaults, no cgo: the cache and memtables are Go heap", nil, false, (256 - 32) << 20},
		{"sized, cgo", []string{"--memory-mib", "1024", "--cache-mib", "128", "--memtable-mib", "64"}, true, (1024 - 128 - 3*64 - 32) << 20},
		{"sized, no cgo", []string{"--memory-mib", "1024", "--cache-mib", "128", "--memtable-mib", "64"}, false, (1024 - 32) << 20},
		{"a cache larger than the memory leaves the floor", []string{"--cache-mib", "256"}, true, minGoMemoryLimit},
		{"a memory below the overhead leaves the floor", []string{"--memory-mib", "40"}, false, minGoMemoryLimit},
		{"no limit, cgo", []string{"--memory-mib", "0"}, true, 0},
		{"no limit, no cgo", []string{"--memory-mib", "0"}, false, 0},
	} {
		c, err := Load(tc.args, homeEnv)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, goHeapTarget(c, tc.offHeap), tc.name)
	}
	c, err := Load(nil, homeEnv)
	require.NoError(t, err)
	require.Equal(t, goHeapTarget(c, pebbleOffHeap), goMemoryLimit(c), "this build's Pebble")
}

// Above the target, the limit follows the live heap, leaving a heap goal a
// quarter above it beside the runtime's other memory, so a live heap larger
// than the target never makes the collector run back to back.
func TestMemoryLimitFollowsALiveHeapAboveTheTarget(t *testing.T) {
	const target = 144 << 20
	require.Equal(t, int64(target), memoryLimitFor(target, 0, 0))
	require.Equal(t, int64(target), memoryLimitFor(target, 100<<20, 10<<20), "135 MiB: under the target")
	require.Equal(t, int64(210<<20), memoryLimitFor(target, 160<<20, 10<<20))
}
