package audit

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
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
		d, err := CompareSnapshot(l, res.State, "")
		require.NoError(t, err)
		require.Equal(t, snapAt, d.SnapshotPosition)
		require.Empty(t, d.Differences, "replayed to %d", to)
	}
}
