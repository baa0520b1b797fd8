package eventlog

import (
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
)

// SetCompression gives o's levels the block compression the log's store
// uses (plain Pebble's benchmark baseline takes the same):
//
//   - level 0 stores its blocks uncompressed. Every table a flush writes
//     holds events, outcomes and stream-index entries together, so it
//     overlaps the tables below and a compaction rewrites it, usually within
//     seconds: compressing it (and decompressing it to rewrite it) was
//     CPU spent on every commit for bytes that are soon gone. Level 0 is
//     bounded by Pebble's compaction thresholds, so the disk it costs is a
//     few memtables' worth.
//   - the levels below use Pebble's fastest profile (MinLZ on amd64, Snappy
//     where that is faster), in place of its Snappy default: the same
//     blocks, as small or smaller, for less CPU in every compaction.
//
// Stores written under the earlier settings are read as they are: each
// block names its own compression.
func SetCompression(o *pebble.Options) {
	o.Levels[0].Compression = func() *sstable.CompressionProfile { return sstable.NoCompression }
	for i := 1; i < len(o.Levels); i++ {
		o.Levels[i].Compression = func() *sstable.CompressionProfile { return sstable.FastestCompression }
	}
}

// bottomLevel is the level whose writer options a table built outside
// Pebble's flushes and compactions takes (the snapshot's ingested table):
// compressed, since it may stay where it is ingested.
const bottomLevel = len(pebble.Options{}.Levels) - 1
