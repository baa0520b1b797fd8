package daemon

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
)

// TestRunOnAStoreAnotherCrewdHoldsSaysSo: crewd started a second time on one data directory (the first still
// running, or crewctl's offline command holding the store) refuses to start, and its error says what most likely holds
// the store and what to do, where "store is locked by another process: …: resource temporarily unavailable" named
// neither.
func TestRunOnAStoreAnotherCrewdHoldsSaysSo(t *testing.T) {
	c := testConfig(t)
	store := filepath.Join(c.DataDir, StoreDir)
	require.NoError(t, os.MkdirAll(c.DataDir, 0o700))
	held, err := eventlog.Open(store, nil) // the first crewd's store, open
	require.NoError(t, err)
	defer held.Close()
	require.NoError(t, os.Chmod(store, 0o700)) // as crewd's umask makes it

	served, err := runUntilServed(c)
	require.False(t, served)
	require.ErrorIs(t, err, eventlog.ErrLocked)
	require.Contains(t, err.Error(), "a crewd already running on "+c.DataDir)
	require.Contains(t, err.Error(), "--data")
}
