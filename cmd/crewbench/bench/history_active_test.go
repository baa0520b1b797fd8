package bench

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/cmd/crewd/daemon"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/projections"
)

// TestActiveStateIndependentOfHistory: a history of N events and one of 2N
// over more runs, each with 3 active runs, start an engine (as crewd does:
// its config, the real clock) on the same active state — the same runs hot,
// the same records in them, a snapshot of the same size — and only the
// finished runs differ.
func TestActiveStateIndependentOfHistory(t *testing.T) {
	const active, activeEvents = 3, 300
	states := make([]ActiveState, 0, 2)
	for _, size := range []struct {
		events int64
		runs   int
	}{{3000, 24}, {6000, 36}} {
		dir := t.TempDir()
		_, err := WriteHistory(context.Background(),
			HistoryOptions{Events: size.events, Runs: size.runs, Active: active,
				ActiveEvents: activeEvents, Dir: dir, Submitters: 8, Span: 48 * time.Hour})
		require.NoError(t, err)
		a, cold := startedActiveState(t, dir, size.runs, active)
		require.Equal(t, size.runs-active, cold, "every finished run is cold at start-up")
		states = append(states, a)
	}
	require.EqualValues(t, active*activeEvents, states[0].Events, "each active run holds --active-events")
	require.Equal(t, active, states[0].HotRuns, "only the active runs are hot")
	require.Zero(t, states[0].ColdInMemory, "no finished run's summary in memory")
	require.Equal(t, states[0], states[1], "the same active state at N and 2N")
}

// startedActiveState opens an engine on the history in dir as crewd would
// and returns the active state it holds (a snapshot of it encoded, as
// crewd would store it) and its number of cold runs.
func startedActiveState(t *testing.T, dir string, runs, active int) (ActiveState, int) {
	t.Helper()
	l, err := eventlog.Open(filepath.Join(dir, daemon.StoreDir), nil)
	require.NoError(t, err)
	defer l.Close()
	cfg := historyConfig()
	e, err := commands.Open(l, commands.Options{Config: &cfg, ExpiryInterval: -1})
	require.NoError(t, err)
	defer e.Close()
	var a ActiveState
	var cold int
	e.Read(func(s *projections.State) {
		a = activeStateOf(s, activeRuns(runs, active))
		b, err := projections.EncodeSnapshot(s)
		require.NoError(t, err)
		a.SnapshotBytes = len(b)
		cold = s.ColdRuns()
	})
	return a, cold
}

// TestHistoryEndsWithASnapshotOfTheActiveState: the store's newest snapshot
// is at its head and holds the active runs alone, so crewd folds no tail at
// start-up and what it loads is what the report reads.
func TestHistoryEndsWithASnapshotOfTheActiveState(t *testing.T) {
	const runs, active = 24, 3
	dir := t.TempDir()
	st, err := WriteHistory(context.Background(), HistoryOptions{Events: 3000, Runs: runs, Active: active,
		ActiveEvents: 300, Dir: dir, Submitters: 8, Span: 48 * time.Hour})
	require.NoError(t, err)
	head, a, err := storeHead(filepath.Join(dir, daemon.StoreDir), activeRuns(runs, active))
	require.NoError(t, err)
	require.Equal(t, st.Head, head)
	require.Equal(t, head, a.SnapshotAt, "the snapshot is at the head")
	started, _ := startedActiveState(t, dir, runs, active)
	started.SnapshotAt, started.SnapshotBytes = a.SnapshotAt, a.SnapshotBytes
	require.Equal(t, started, a, "the snapshot holds what an engine started on the store holds")
}
