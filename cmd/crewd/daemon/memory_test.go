package daemon

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The Go heap's soft limit is what --memory-mib leaves beside the store's
// cache, three memtables and the binary, never below minGoMemoryLimit, and
// none without --memory-mib.
func TestGoMemoryLimitIsWhatTheStoreLeaves(t *testing.T) {
	c, err := Load(nil, homeEnv)
	require.NoError(t, err)
	require.Equal(t, int64(256-32-3*16-32)<<20, goMemoryLimit(c), "the defaults")

	c, err = Load([]string{"--memory-mib", "1024", "--cache-mib", "128", "--memtable-mib", "64"}, homeEnv)
	require.NoError(t, err)
	require.Equal(t, int64(1024-128-3*64-32)<<20, goMemoryLimit(c))

	c, err = Load([]string{"--cache-mib", "256"}, homeEnv)
	require.NoError(t, err)
	require.Equal(t, int64(minGoMemoryLimit), goMemoryLimit(c), "a cache larger than the memory leaves the floor")

	c, err = Load([]string{"--memory-mib", "0"}, homeEnv)
	require.NoError(t, err)
	require.Zero(t, goMemoryLimit(c), "no limit")
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
