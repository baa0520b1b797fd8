package eventlog

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// The log caches each stream's version for the next append to it; a stream is a run, so a cache kept for every
// stream appended to since Open grew with every run a daemon ever created. It holds what recent appends touched.
func TestStreamVersionCacheDoesNotGrowWithStreams(t *testing.T) {
	const perAppendStreams = 250
	cached := func(streams int) int {
		l, _ := openMem(t)
		defer func() { require.NoError(t, l.Close()) }()
		for i := 0; i < streams; i += perAppendStreams {
			// A run still worked on is appended to all along.
			ws := append(make([]Write, 0, perAppendStreams+1), Write{Events: evs("live", 1)})
			for j := i; j < min(i+perAppendStreams, streams); j++ {
				ws = append(ws, Write{Events: evs(fmt.Sprintf("run-%d", j), 2)})
			}
			_, err := l.Append(ws...)
			require.NoError(t, err)
		}
		// A stream whose version left the cache is read back from the index: the next append to it follows on.
		_, err := l.Append(Write{Expected: []Expectation{{Stream: "run-0", Version: 2}}, Events: evs("run-0", 1)})
		require.NoError(t, err)
		last, err := l.Append(Write{Events: evs("run-1", 1)})
		require.NoError(t, err)
		it := l.Read(last)
		require.True(t, it.Next())
		require.Equal(t, uint64(3), it.Event().StreamVersion)
		require.NoError(t, it.Close())
		l.mu.Lock()
		defer l.mu.Unlock()
		require.Contains(t, l.versions, "live", "the cache keeps the streams still appended to")
		return len(l.versions)
	}
	short, long := cached(100), cached(40_000)
	require.Equal(t, 101, short)
	// A sweep leaves fewer than maxCachedVersions streams here (two events each), and the next is due at twice that:
	// give or take one append's.
	require.LessOrEqual(t, long, 2*maxCachedVersions+perAppendStreams+1, "the cache holds %d streams after 40,000", long)
}

// TestStreamVersionSweepKeepsTheLastMaxCachedVersionsPositions: a sweep drops a stream whose last event lies
// maxCachedVersions positions behind the durable head, outside the last maxCachedVersions positions, and keeps one
// whose last event lies one position nearer; the dropped stream's next append reads its version from the index.
func TestStreamVersionSweepKeepsTheLastMaxCachedVersionsPositions(t *testing.T) {
	l, _ := openMem(t)
	defer l.Close()
	oneEventEach := func(prefix string, streams int) []Write {
		ws := make([]Write, streams)
		for i := range ws {
			ws[i] = Write{Events: evs(fmt.Sprintf("%s-%d", prefix, i), 1)}
		}
		return ws
	}
	// Positions 1 and 2, then up to the durable head maxCachedVersions+1: "out" lies maxCachedVersions behind it.
	_, err := l.Append(Write{Events: evs("out", 1)}, Write{Events: evs("in", 1)})
	require.NoError(t, err)
	_, err = l.Append(oneEventEach("fill", maxCachedVersions-1)...)
	require.NoError(t, err)
	// The cache reaches twice maxCachedVersions streams with this append, which sweeps it.
	_, err = l.Append(oneEventEach("more", maxCachedVersions-1)...)
	require.NoError(t, err)
	l.mu.Lock()
	_, out := l.versions["out"]
	_, in := l.versions["in"]
	l.mu.Unlock()
	require.False(t, out, "the last event maxCachedVersions positions behind the durable head")
	require.True(t, in, "the last event maxCachedVersions-1 positions behind the durable head")

	_, err = l.Append(Write{Expected: []Expectation{{Stream: "out", Version: 1}}, Events: evs("out", 1)})
	require.NoError(t, err)
}
