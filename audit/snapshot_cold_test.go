package audit

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/projections"
)

// TestCompareSnapshotWithColdRuns: the daemon's snapshot holds the runs that went cold as summaries, their records
// in the log; replay --diff compares them as the daemon reads them back, whether the replay stops at or past the
// snapshot or before it, and finds no difference where the log and the snapshot agree.
func TestCompareSnapshotWithColdRuns(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	head := audittest.Scenario(t, dir)
	snapAt := head - 1 // the cancelled run has ended, the other one not yet
	require.Equal(t, []string{audittest.RunUnlimited}, audittest.ColdSnapshot(t, dir, snapAt))

	l, err := Open(dir)
	require.NoError(t, err)
	defer l.Close()
	for _, to := range []uint64{head, snapAt, snapAt - 1} {
		res, err := Replay(l, ReplayOptions{To: to})
		require.NoError(t, err)
		d, err := CompareSnapshot(l, res.State, "", 0)
		require.NoError(t, err)
		require.Equal(t, snapAt, d.SnapshotPosition)
		require.Empty(t, d.Differences, "replayed to %d", to)
	}
}

// TestCompareSnapshotOfAnotherPosition: a snapshot stored at one position that holds the state at another (saved at
// the wrong position: its seal covers its bytes, not its key) is one start-up does not load (projections.LoadTiered),
// and verify warns of. replay --diff compared it all the same: folded on from the position it holds, it showed no
// difference with the log, and stopped before it, a fresh fold to the position it is stored at showed every event
// in between as one; both named it "taken at" the position it is stored at. It is refused as start-up refuses it.
func TestCompareSnapshotOfAnotherPosition(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	head := audittest.Scenario(t, dir)
	l, err := eventlog.Open(dir, nil)
	require.NoError(t, err)
	older, err := l.LatestSnapshot()
	require.NoError(t, err)
	require.Less(t, older.Position, head)
	require.NoError(t, l.SaveSnapshot(head, older.Data))
	require.NoError(t, l.Close())

	l, err = Open(dir)
	require.NoError(t, err)
	defer l.Close()
	for _, to := range []uint64{head, head - 1} {
		res, err := Replay(l, ReplayOptions{To: to})
		require.NoError(t, err)
		_, err = CompareSnapshot(l, res.State, "", 0)
		require.ErrorIs(t, err, projections.ErrBadSnapshot, "replayed to %d", to)
		require.ErrorContains(t, err, fmt.Sprintf("snapshot at %d holds the state at position %d", head,
			older.Position))
	}
}
