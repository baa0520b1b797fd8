package audit

import (
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
	l, err := eventlog.Open(dir, nil)
	require.NoError(t, err)
	s := projections.New()
	require.NoError(t, projections.Replay(s, l, snapAt))
	store := projections.NewColdStore(l, 0)
	store.WriteIndex()
	s.SetColdStore(store)
	require.Equal(t, []string{audittest.RunUnlimited}, s.EvictAll(audittest.Epoch.UnixMilli()+1e9, 0, 0))
	b, err := projections.EncodeSnapshot(s)
	require.NoError(t, err)
	require.NoError(t, l.SaveSnapshot(snapAt, b))
	require.NoError(t, l.Close())

	l, err = Open(dir)
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
