package eventlog

import (
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"
)

// A reader that follows the head opens an iterator from the next position
// after every append. Once the newest events were flushed next to a
// snapshot, its seek must not read the snapshot's block: a snapshot too
// large for the block cache would be read and decompressed on every wake.
func TestFollowingTheHeadSkipsTheSnapshotBlock(t *testing.T) {
	l, err := Open(t.TempDir(), &Options{CacheSize: 1 << 20, MemTableSize: 4 << 20})
	require.NoError(t, err)
	defer l.Close()
	appendOne := func(i int) {
		_, err := l.Append(Write{Events: []Event{benchEvent(i)}})
		require.NoError(t, err)
	}
	for i := range 200 {
		appendOne(i)
	}
	head := flushNextToSnapshot(t, l, 3<<20) // larger than the whole cache

	before := l.db.Metrics().BlockCache
	next := head + 1
	for i := range 50 {
		appendOne(200 + i)
		it := l.Read(next)
		for it.Next() {
			next = it.Event().Position + 1
		}
		require.NoError(t, it.Close())
	}
	after := l.db.Metrics().BlockCache
	require.Equal(t, head+51, next)
	require.Less(t, after.Misses-before.Misses, int64(10), "tail reads missed the block cache %d times", after.Misses-before.Misses)
}

// flushNextToSnapshot saves an incompressible snapshot of size bytes at the
// head, flushes the memtable so that the newest events and the snapshot
// share a table, and returns the head. NB: SaveSnapshot ingests a table of
// its own; the snapshot is written through a batch here, as stores written
// before ingestion hold it, to put it next to the events in one table (as
// a compaction can too).
func flushNextToSnapshot(t testing.TB, l *Log, size int) uint64 {
	snap := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range snap {
		snap[i] = byte(rng.Uint32())
	}
	head, _ := l.Head()
	require.NoError(t, l.db.Set(snapshotKey(head), seal(snap), pebble.Sync))
	require.NoError(t, l.db.Flush())
	return head
}
