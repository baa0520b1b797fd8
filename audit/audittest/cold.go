package audittest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/projections"
)

// ColdSnapshot saves the state at position at of the store in dir as its newest snapshot, with the runs that have
// ended by then gone cold, as the daemon's eviction leaves them: summaries in the snapshot and the index, records in
// the log. It returns the ids of the runs gone cold.
func ColdSnapshot(t testing.TB, dir string, at uint64) []string {
	t.Helper()
	l, err := eventlog.Open(dir, nil)
	require.NoError(t, err)
	defer func() { require.NoError(t, l.Close()) }()
	s := projections.New()
	require.NoError(t, projections.Replay(s, l, at))
	store := projections.NewColdStore(l, 0)
	store.WriteIndex()
	s.SetColdStore(store)
	cold := s.EvictAll(Epoch.UnixMilli()+1e9, 0, 0)
	b, err := projections.EncodeSnapshot(s)
	require.NoError(t, err)
	require.NoError(t, l.SaveSnapshot(at, b))
	return cold
}
