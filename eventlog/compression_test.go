package eventlog

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// TestStoreCompressesBelowLevelZeroOnly: the options the log gives Pebble
// leave level 0's blocks uncompressed and compress every level below with
// the fastest profile, and a table built for ingestion (the snapshot's)
// is compressed.
func TestStoreCompressesBelowLevelZeroOnly(t *testing.T) {
	l, err := Open("store", &Options{FS: vfs.NewMem()})
	require.NoError(t, err)
	defer l.Close()
	po := l.pebbleOpts
	require.Equal(t, "NoCompression", po.Levels[0].Compression().Name)
	for i := 1; i < len(po.Levels); i++ {
		require.Equal(t, "Fastest", po.Levels[i].Compression().Name, "level %d", i)
	}
	w := po.MakeWriterOptions(bottomLevel, l.db.TableFormat())
	require.Equal(t, "Fastest", w.Compression.Name)
	require.Equal(t, 1, w.BlockSizeThreshold, "the bottom level inherits level 0's block threshold")
}

// TestStoreReadsTablesOfEveryCompression: a store written under Pebble's
// default (Snappy everywhere) opens and reads under the log's settings,
// and one written under them reads under the default.
func TestStoreReadsTablesOfEveryCompression(t *testing.T) {
	fs := vfs.NewMem()
	write := func(set func(*pebble.Options), key string) {
		o := &pebble.Options{FS: fs, FormatMajorVersion: pebble.FormatNewest, Logger: newPebbleLogger(slog.New(slog.DiscardHandler))}
		set(o)
		db, err := pebble.Open("db", o)
		require.NoError(t, err)
		for i := range 2000 {
			require.NoError(t, db.Set(fmt.Appendf(nil, "%s%05d", key, i), []byte("value value value value"), nil))
		}
		require.NoError(t, db.Flush())
		require.NoError(t, db.Compact(t.Context(), []byte{0}, []byte{0xff}, true))
		require.NoError(t, db.Close())
	}
	count := func(set func(*pebble.Options)) int {
		o := &pebble.Options{FS: fs, FormatMajorVersion: pebble.FormatNewest, Logger: newPebbleLogger(slog.New(slog.DiscardHandler))}
		set(o)
		db, err := pebble.Open("db", o)
		require.NoError(t, err)
		defer db.Close()
		it, err := db.NewIter(nil)
		require.NoError(t, err)
		n := 0
		for ok := it.First(); ok; ok = it.Next() {
			n++
		}
		require.NoError(t, it.Close())
		return n
	}
	write(func(*pebble.Options) {}, "old")
	require.Equal(t, 2000, count(SetCompression))
	write(SetCompression, "new")
	require.Equal(t, 4000, count(func(*pebble.Options) {}))
}
