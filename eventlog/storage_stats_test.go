package eventlog

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"
)

// StorageStats follows the storage engine's work: the WAL an append writes, the level-0 tables a flush adds, the
// compaction that folds them, the space on disk, and the outcome filter the appends' command ids fill.
func TestStorageStatsFollowTheEngine(t *testing.T) {
	l, _ := openMem(t)
	defer l.Close()
	st := l.StorageStats()
	require.Zero(t, st.L0Files)
	require.Zero(t, st.Flushes)
	require.Zero(t, st.Compactions)
	require.Zero(t, st.OutcomeFilterBytes, "no filter before the first append")

	flushes := 0
	for round := range 4 {
		for i := range 8 {
			_, err := l.Append(Write{Principal: "oA", CommandID: fmt.Sprintf("c-%d-%d", round, i), Events: evs("A", 4)})
			require.NoError(t, err)
		}
		if round == 0 {
			st = l.StorageStats()
			require.Positive(t, st.WALBytesWritten)
			require.GreaterOrEqual(t, st.DiskBytes, st.WALBytesWritten, "nothing flushed: the WAL holds it all")
		}
		require.NoError(t, l.db.Flush())
		flushes++
		st = l.StorageStats()
		require.GreaterOrEqual(t, st.Flushes, int64(flushes))
		if round == 0 {
			require.Positive(t, st.L0Files, "a flushed table waits in level 0")
			require.Positive(t, st.L0Sublevels)
		}
	}
	require.Positive(t, st.WALBytesWritten)
	require.Positive(t, st.DiskBytes)
	require.Positive(t, st.OutcomeFilterBytes, "the appends' command ids are in the filter")

	before := st
	require.Positive(t, before.FlushBytes)
	// NB: Pebble may have compacted the overlapping tables of level 0 on its own already (every flush holds the
	// head's key); then the call finds nothing left to do. Either way the counters hold a compaction.
	require.NoError(t, l.db.Compact(t.Context(), []byte{0}, []byte{0xff}, true))
	st = l.StorageStats()
	require.Zero(t, st.L0Files, "the compaction moved level 0 down")
	require.Positive(t, st.Compactions)
	require.GreaterOrEqual(t, st.Compactions, before.Compactions)
	require.Positive(t, st.CompactionBytesRead, "level 0's tables overlap: they were merged, not moved")
	require.Positive(t, st.CompactionBytesWritten)
	require.GreaterOrEqual(t, st.WALBytesWritten, before.WALBytesWritten)
}

// The log's Pebble options carry the stall counter: a stall Pebble reports is in StorageStats.
func TestStorageStatsCountPebbleWriteStalls(t *testing.T) {
	l, _ := openMem(t)
	defer l.Close()
	el := l.pebbleOpts.EventListener
	require.NotNil(t, el)
	el.WriteStallBegin(pebble.WriteStallBeginInfo{Reason: "memtable count limit reached"})
	time.Sleep(5 * time.Millisecond)
	el.WriteStallEnd()
	st := l.StorageStats()
	require.Equal(t, int64(1), st.WriteStalls)
	require.GreaterOrEqual(t, st.WriteStallTime, 5*time.Millisecond)
}

// Stalls are counted and timed (one going on included), and logged at the first and then at most once a minute,
// with the count of those not logged.
func TestWriteStallsCountedAndLoggedSparingly(t *testing.T) {
	var buf bytes.Buffer
	s := newWriteStalls(slog.New(slog.NewTextHandler(&buf, nil)))
	t0 := time.Unix(1_700_000_000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }

	s.begin(at(0), "L0 file count limit exceeded")
	s.end(at(2 * time.Second))
	s.begin(at(10*time.Second), "memtable count limit reached")
	s.end(at(11 * time.Second))
	s.begin(at(20*time.Second), "memtable count limit reached")
	n, d := s.read(at(23 * time.Second))
	require.Equal(t, int64(3), n)
	require.Equal(t, 6*time.Second, d, "2 s and 1 s ended, 3 s of the one going on")
	s.end(at(24 * time.Second))
	n, d = s.read(at(30 * time.Second))
	require.Equal(t, int64(3), n)
	require.Equal(t, 7*time.Second, d)
	s.end(at(31 * time.Second)) // an end without a begin changes nothing
	_, d = s.read(at(40 * time.Second))
	require.Equal(t, 7*time.Second, d)

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 1, "the stalls within a minute of the first are not logged: %s", buf.String())
	require.Contains(t, lines[0], "L0 file count limit exceeded")

	s.begin(at(time.Minute-time.Nanosecond), "memtable count limit reached")
	lines = strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 1, "logged again within a minute of the last line")

	s.begin(at(time.Minute), "memtable count limit reached")
	lines = strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 2, "not logged again a minute after the last line")
	require.Contains(t, lines[1], "stalls_since_last_line=3")
}
