package bench

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/cmd/crewd/daemon"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/projections"
	"github.com/crewlog/crewlog/projections/projectionstest"
)

// A history as crewbench writes it (delegations settled with results,
// refusals, asks, usage, mailbox traffic; runs ended over two days) answers
// every query of every run alike from the full fold, from a fold from
// position 1 that makes ended runs cold as it goes, and from the writer's
// snapshot (which holds cold runs) plus its tail.
func TestHistoryAnswersAlikeHotOrCold(t *testing.T) {
	dir := t.TempDir()
	_, err := WriteHistory(context.Background(), HistoryOptions{Events: 12000, Runs: 80, Active: 3, Dir: dir,
		Submitters: 8, Span: 48 * time.Hour})
	require.NoError(t, err)
	l, err := eventlog.Open(filepath.Join(dir, daemon.StoreDir), &eventlog.Options{ReadOnly: true})
	require.NoError(t, err)
	defer l.Close()
	full := projections.New()
	require.NoError(t, projections.Replay(full, l, 0))
	now := time.Now().UnixMilli()
	want := projectionstest.Answers(t, full, now)
	for _, noSnapshot := range []bool{true, false} {
		s, info, err := projections.LoadTiered(l, projections.Tiering{NoSnapshot: noSnapshot, Now: now})
		require.NoError(t, err)
		require.Equal(t, 80-3, s.ColdRuns(), "every ended run is cold")
		if !noSnapshot {
			require.NotZero(t, info.SnapshotPosition, "the writer snapshotted once runs went cold")
		}
		what := "folded from position 1"
		if !noSnapshot {
			what = "snapshot and tail"
		}
		projectionstest.RequireSame(t, want, projectionstest.Answers(t, s, now), what)
	}
}
