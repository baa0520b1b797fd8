package daemon

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
)

// TestRunRefusesABareStore: a data directory that is itself a store (a checkpoint, as migrate's pre-migrate backups
// are, which crewctl reads as a data directory) had crewd make a new, empty store inside it, and serve that: the
// store it was pointed at was not read, and the copy, now holding a directory and crewd's secrets among Pebble's
// files, was refused by a restore from then on. crewd refuses it, says how to start on it, and writes nothing there.
func TestRunRefusesABareStore(t *testing.T) {
	c := testConfig(t)
	require.NoError(t, os.MkdirAll(c.DataDir, 0o700))
	l, err := eventlog.Open(c.DataDir, nil)
	require.NoError(t, err)
	require.NoError(t, l.Close())
	before, err := os.ReadDir(c.DataDir)
	require.NoError(t, err)

	served, err := runUntilServed(c)
	require.False(t, served, "crewd served a new, empty store")
	require.ErrorContains(t, err, c.DataDir+" is a store itself")
	require.ErrorContains(t, err, "crewctl restore "+c.DataDir+" --data NEWDIR")
	after, err := os.ReadDir(c.DataDir)
	require.NoError(t, err)
	require.Equal(t, before, after, "nothing was written there")
}
