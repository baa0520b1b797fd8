//go:build crewlog_fixtures

package eventlog

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A rewind below format 4 stores the snapshot whole again, as the stores
// of formats 1 to 3 hold it, and the step to format 4 chunks it back.
//
//	go test -tags crewlog_fixtures ./eventlog -run RewindStoresTheSnapshotWhole
func TestRewindStoresTheSnapshotWhole(t *testing.T) {
	l, _ := openWithEightEvents(t)
	defer l.Close()
	data := incompressible(3*snapshotChunk+1, 8)
	require.NoError(t, l.SaveSnapshot(7, data))
	require.NoError(t, l.RewindFormatForFixtures(FormatPrincipalOutcomes))
	require.Equal(t, 1, countKeys(t, l, prefixSnapshot))
	raw := rawGet(t, l, snapshotKey(7))
	p, err := unseal(snapshotKey(7), raw)
	require.NoError(t, err)
	require.Equal(t, data, p)

	require.NoError(t, l.Upgrade(FormatPrincipalOutcomes, FormatChunkedSnapshots, func(u *Upgrade) error {
		_, err := u.ChunkSnapshots()
		return err
	}, nil))
	require.Equal(t, 1+snapshotChunks(len(data)), countKeys(t, l, prefixSnapshot))
	s, err := l.LatestSnapshot()
	require.NoError(t, err)
	require.Equal(t, Snapshot{Position: 7, Data: data}, s)
}
