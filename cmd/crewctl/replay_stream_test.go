package main

import (
	"bytes"
	"context"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/projections"
)

// TestReplayHoldsNoTimeline: replay held every entry of the timeline until it printed them all, so replaying a store
// of millions of events took gigabytes. The live heap at any write of its output, text or --json, now does not grow
// with the events replayed: a store of 4N config changes (a state that does not grow) holds about what one of N does,
// with --explain too, which held every decision it re-ran until it printed them after the state.
func TestReplayHoldsNoTimeline(t *testing.T) {
	const n = 5000
	small, large := configChanges(t, n), configChanges(t, 4*n)
	for _, args := range [][]string{nil, {"--json"}, {"--explain"}, {"--explain", "--json"}} {
		atN, at4N := peakHeapOfReplay(t, small, args), peakHeapOfReplay(t, large, args)
		// NB: a generous factor: the timeline of N events, or their decisions, are about as large as what the
		// replay holds besides them, so held they grow the heap twofold or more from N to 4N events (and about
		// fourfold, both held).
		require.Less(t, at4N, atN*8/5, "%v: the heap held %d bytes replaying N events, %d replaying 4N", args, atN, at4N)
	}
}

// peakHeapOfReplay runs replay on data with args and returns the largest live heap, past what was live before it, at
// a write of its output.
func peakHeapOfReplay(t *testing.T, data string, args []string) int64 {
	t.Helper()
	before := liveHeap()
	out := &heapAtWrite{}
	var errb strings.Builder
	code := (&app{io: stdio{out: out, err: &errb}}).run(context.Background(),
		append([]string{"replay", "--data", data}, args...))
	require.Equal(t, exitOK, code, errb.String())
	require.Positive(t, out.writes)
	return int64(out.peak) - int64(before)
}

// heapAtWrite discards what is written to it and samples the live heap at its first write and every 16th after.
type heapAtWrite struct {
	writes int
	peak   uint64
}

func (h *heapAtWrite) Write(p []byte) (int, error) {
	if h.writes%16 == 0 {
		h.peak = max(h.peak, liveHeap())
	}
	h.writes++
	return len(p), nil
}

// liveHeap is the heap live after a collection. NB: two, as what a sync.Pool drops survives the first.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// configChanges makes a store of n config changes, flushed into tables (so an open does not read its writes back
// into memory), and returns its data directory.
func configChanges(t *testing.T, n int) string {
	t.Helper()
	data := t.TempDir()
	store := filepath.Join(data, storeDir)
	l, err := eventlog.Open(store, nil)
	require.NoError(t, err)
	w := audittest.NewWorld(l, audittest.Epoch.UnixNano())
	cfg := projections.DefaultConfig()
	for i := range n {
		cfg.MaxSlots = 2 + i%2
		_, err := w.Buffer(audittest.Admin, &commands.Configure{Config: cfg})
		require.NoError(t, err)
		if w.Buffered() >= 5000 {
			require.NoError(t, w.Flush())
		}
	}
	require.NoError(t, w.Flush())
	require.NoError(t, l.Close())
	db, err := pebble.Open(store, &pebble.Options{FormatMajorVersion: pebble.FormatNewest, Logger: audittest.QuietPebble{}})
	require.NoError(t, err)
	require.NoError(t, db.Close())
	return data
}

// TestTimelineRowsLineUpAsATable: the timeline's rows, written one by one to the widths fitted beforehand, are the
// bytes a table (text/tabwriter) of the same rows printed when replay held them all: wide and narrow runes, escaped
// control characters and empty cells alike.
func TestTimelineRowsLineUpAsATable(t *testing.T) {
	at := time.Date(2026, 10, 1, 9, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name    string
		entries []audit.Entry
	}{
		{"none", nil},
		{"one", []audit.Entry{{Position: 1, Time: at, Run: "$engine", Actor: "engine", Type: "engine.configured",
			Meaning: "config"}}},
		{"wider than the header and not", []audit.Entry{
			{Position: 9, Time: at, Run: "r", Actor: "a", Type: "t", Meaning: ""},
			{Position: 123456789012, Time: at.Add(time.Hour), Run: "team_20261001090000_a1b2c3d4e5f60001",
				Actor: "worker/01_build", Type: "delegate.requested", Meaning: "asks\tfor\nmore"},
		}},
		{"runes and control characters", []audit.Entry{
			{Position: 1, Time: at, Run: "équipe_ü", Actor: "worker/\x1b[31mred", Type: "task.created",
				Meaning: "tâche \x00"},
			{Position: 2, Time: at, Run: "日本語のラン", Actor: "w\t/x", Type: "\xff", Meaning: "done"},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var want bytes.Buffer
			tw := screen{&want}.table()
			tw.printf("POS\tTIME\tRUN\tACTOR\tEVENT\tMEANING\n")
			for _, e := range c.entries {
				tw.printf("%d\t%s\t%s\t%s\t%s\t%s\n", e.Position, e.Time.Format(time.RFC3339), e.Run, e.Actor, e.Type,
					e.Meaning)
			}
			require.NoError(t, tw.flush())

			var widths timelineWidths
			for _, e := range c.entries {
				widths.fit(e)
			}
			var got bytes.Buffer
			rows := newTimelineRows(&got, widths)
			require.NoError(t, rows.write(timelineHeader))
			for _, e := range c.entries {
				require.NoError(t, rows.write(timelineCells(e)))
			}
			require.Equal(t, want.String(), got.String())
		})
	}
}
