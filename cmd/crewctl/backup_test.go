package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRestoreFailingPartWayLeavesNoStore: a restore that fails part-way (here on an entry of the backup's store it
// cannot copy, which sorts after the store's files; a full disk does the same) copied the files before it into
// DIR/store and left them there. That half store has no manifest marker, so crewd started on DIR as a new, empty
// store, and a second restore was refused because DIR was not empty. The copy is put in place only once it is whole.
func TestRestoreFailingPartWayLeavesNoStore(t *testing.T) {
	tmp := t.TempDir()
	backup := filepath.Join(tmp, "backup")
	require.Equal(t, exitOK, crewctl(t, nil, "backup", backup, "--data", scenarioData(t)).code)
	require.NoError(t, os.WriteFile(filepath.Join(backup, serverKeyFile), []byte("key"), 0o600))
	stray := filepath.Join(backup, storeDir, "zz")
	require.NoError(t, os.Mkdir(stray, 0o700))

	target := filepath.Join(tmp, "restored")
	r := crewctl(t, nil, "restore", backup, "--data", target)
	require.Equal(t, exitProblem, r.code, r.out+r.err)
	require.Contains(t, r.err, "zz is not a regular file")
	entries, err := os.ReadDir(target)
	require.NoError(t, err)
	require.Empty(t, entries, "nothing of the failed restore is left in %s", target)

	require.NoError(t, os.Remove(stray))
	r = crewctl(t, nil, "restore", backup, "--data", target)
	require.Equal(t, exitOK, r.code, r.out+r.err)
	r = crewctl(t, nil, "verify", "--data", target)
	require.Equal(t, exitOK, r.code, r.out+r.err)
}
