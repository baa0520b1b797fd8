package daemon

import (
	"context"
	"log/slog"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

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
	for _, tc := range []struct {
		name           string
		live, overhead uint64
		want           int64
	}{
		{"nothing live", 0, 0, target},
		{"135 MiB: under the target", 100 << 20, 10 << 20, target},
		{"exactly the target", 112 << 20, 4 << 20, target},
		{"above: a quarter over the live heap", 160 << 20, 10 << 20, 210 << 20},
	} {
		require.Equal(t, tc.want, memoryLimitFor(target, tc.live, tc.overhead), tc.name)
	}
}

// What the runtime maps beside the heap's spans is the total less what was
// released and what the heap holds (free, objects, unused); none when the
// heap accounts for it all.
func TestLiveAndOverheadFromTheRuntimeSamples(t *testing.T) {
	for _, tc := range []struct {
		name           string
		v              [6]uint64 // live, total, released, free, objects, unused
		live, overhead uint64
	}{
		{"beside the heap", [6]uint64{50, 200, 20, 10, 100, 10}, 50, 60},
		{"the heap is all", [6]uint64{50, 140, 20, 10, 100, 10}, 50, 0},
		{"more released than mapped", [6]uint64{50, 10, 20, 0, 0, 0}, 50, 0},
	} {
		live, overhead := liveAndOverhead(tc.v)
		require.Equal(t, tc.live, live, tc.name)
		require.Equal(t, tc.overhead, overhead, tc.name)
	}
}

// afterEachGC's hook runs after a collection, again after the next one,
// and no more once it returns false.
func TestAfterEachGCRunsAfterEveryCollection(t *testing.T) {
	ran := make(chan int, 4)
	n := 0
	afterEachGC(context.Background(), func() bool {
		n++
		ran <- n
		return n < 2
	})
	runtime.GC()
	require.Equal(t, 1, <-ran)
	runtime.GC()
	require.Equal(t, 2, <-ran)
	// A second hook, armed now, runs after each of the next two
	// collections: once it has run after the second, the finalizers of
	// the first (run in order, on one goroutine) have had their turn.
	seen, done := 0, make(chan struct{})
	afterEachGC(context.Background(), func() bool {
		if seen++; seen == 2 {
			close(done)
		}
		return seen < 2
	})
	runtime.GC()
	runtime.GC()
	<-done
	select {
	case m := <-ran:
		require.FailNow(t, "ran after returning false", "call %d", m)
	default:
	}
}

// The warning that the live heap outgrew the target is given as it goes
// above, not at every collection it stays there, and once an hour at most
// however often it crosses back and forth.
func TestOutgrowthWarnsWhenTheLiveHeapGoesAbove(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var o outgrowth
	for i, step := range []struct {
		above bool
		at    time.Duration
		warn  bool
	}{
		{false, 0, false},
		{true, time.Minute, true},                // outgrew it
		{true, 2 * time.Minute, false},           // still above
		{false, 3 * time.Minute, false},          // back within
		{true, 4 * time.Minute, false},           // above again, within the hour
		{false, 5 * time.Minute, false},          //
		{true, time.Minute + time.Hour, true},    // above again, an hour after the warning
		{true, time.Minute + 3*time.Hour, false}, // still above
		{false, 4 * time.Hour, false},            //
		{true, 4*time.Hour + time.Second, true},  // more than an hour since the last
	} {
		require.Equal(t, step.warn, o.step(step.above, t0.Add(step.at)), "step %d", i)
	}
}

// followLive warns, naming the live heap and --memory-mib, after the
// collection that finds a live heap above the target, and sets the soft
// limit a quarter above it.
func TestFollowLiveWarnsOnceTheLiveHeapOutgrowsTheTarget(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	ctx, cancel := context.WithCancel(context.Background())
	defer func() {
		cancel()
		runtime.GC() // the hook sees ctx ended and stops
		runtime.GC()
		debug.SetMemoryLimit(prev)
	}()
	var logged lockedBuffer
	lg := slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn}))
	const target = minGoMemoryLimit
	debug.SetMemoryLimit(target)
	followLive(ctx, target, 100<<20, lg)
	runtime.GC()
	runtime.GC()
	require.NotContains(t, logged.String(), "outgrew", "the test's heap is under the target")

	live := make([]byte, 2*target) // live until the end of the test
	for i := range live {
		live[i] = 1
	}
	require.Eventually(t, func() bool {
		runtime.GC()
		return strings.Contains(logged.String(), "outgrew")
	}, 10*time.Second, 10*time.Millisecond)
	require.Contains(t, logged.String(), "memoryMiB=100")
	require.Greater(t, debug.SetMemoryLimit(-1), int64(2*target)+int64(2*target)/liveHeadroom-1)
	require.Equal(t, 1, strings.Count(logged.String(), "outgrew"), "one warning however many collections")
	runtime.KeepAlive(live)
}
