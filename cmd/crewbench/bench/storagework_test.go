package bench

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The cells of the stores on Pebble report what their Pebble wrote per operation; the others report nothing.
func TestCellsReportTheirStorageWork(t *testing.T) {
	o := CompareOptions{Duration: 200 * time.Millisecond, Clients: []int{2}, Rounds: 1, Dir: t.TempDir(),
		Only: []string{"pebble", "crewlog", "socket", "sqlite-group"}, SyncCount: inProcess{}}
	var progress bytes.Buffer
	o.Progress = &progress
	cmp, err := Compare(context.Background(), o)
	require.NoError(t, err, progress.String())
	require.Empty(t, cmp.Excluded, progress.String())
	seen := 0
	for _, r := range cmp.Rounds[0] {
		require.NoError(t, r.Err, "%s %s", r.Impl, r.Cell)
		if r.Impl == "sqlite-group" {
			require.Nil(t, r.Storage, "SQLite is not on Pebble")
			continue
		}
		require.NotNil(t, r.Storage, "%s %s", r.Impl, r.Cell)
		require.Equal(t, r.Finished, r.Storage.Ops, "per operation finished, as the CPU")
		require.Positive(t, r.Storage.Work.WAL, "%s %s: its admissions went through the WAL", r.Impl, r.Cell)
		seen++
	}
	require.Equal(t, 6, seen, "pebble, crewlog and socket, on one run and on own runs")
	require.Contains(t, progress.String(), "storage per operation: WAL ")
}

func TestCellStorageString(t *testing.T) {
	c := storageBetween(StorageWork{WAL: 1000, Flushed: 0, CompactionRead: 500, CompactionWritten: 100},
		StorageWork{WAL: 6000, Flushed: 5200, CompactionRead: 6700, CompactionWritten: 3900}, 2)
	require.Equal(t,
		"storage per operation: WAL 2.50 KB, flushed 2.60 KB, compactions read 3.10 KB and wrote 1.90 KB", c.String())
	require.Equal(t, "storage: no operations", storageBetween(StorageWork{}, StorageWork{}, 0).String())
}
