package eventlog

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog/stagingtest"
)

// killedCheckpointEnv, set to a JSON array of a store and a destination, has the test binary open the store and
// checkpoint it to the destination instead of running the tests, and stop once the copy is whole in its staging
// directory (killableCheckpoint).
const killedCheckpointEnv = "CREWLOG_TEST_KILLED_CHECKPOINT"

// killableCheckpoint checkpoints the store to the destination named in args (JSON) and, once the copy is whole in its
// staging directory, waits to be killed (stagingtest.Staged).
func killableCheckpoint(args string) {
	var a [2]string
	if err := json.Unmarshal([]byte(args), &a); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	checkpointStaged = func(string) { stagingtest.Staged() }
	l, err := Open(a[0], nil)
	if err == nil {
		err = l.Checkpoint(a[1])
	}
	fmt.Fprintln(os.Stderr, "checkpoint ended:", err)
	os.Exit(2)
}

// killedWhileCheckpointing checkpoints store to dest in a process of its own and kills it (SIGKILL, as a crash or
// kill -9) once the copy is whole in its staging directory, before it is moved into place.
func killedWhileCheckpointing(t *testing.T, store, dest string) {
	t.Helper()
	args, err := json.Marshal([2]string{store, dest})
	require.NoError(t, err)
	stagingtest.Kill(t, killedCheckpointEnv+"="+string(args))
}

// TestCheckpointKilledWhileStagingIsRemovedByTheNext: a checkpoint killed (kill -9, a crash) while its copy was in
// its staging directory left that directory, a whole store of hard links that kept every file of the store it
// copied on the disk, for good: nothing ever removed it. The next checkpoint beside it removes it.
func TestCheckpointKilledWhileStagingIsRemovedByTheNext(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	l, err := Open(store, nil)
	require.NoError(t, err)
	_, err = l.Append(Write{CommandID: "a", Events: evs("A", 3)})
	require.NoError(t, err)
	require.NoError(t, l.Close())

	parent := t.TempDir()
	killedWhileCheckpointing(t, store, filepath.Join(parent, "first"))
	require.Len(t, stagingtest.Names(t, parent), 1, "the killed checkpoint left its staging directory")

	l, err = Open(store, nil)
	require.NoError(t, err)
	defer l.Close()
	require.NoError(t, l.Checkpoint(filepath.Join(parent, "second")))
	require.Equal(t, []string{"second"}, stagingtest.Names(t, parent))
}

// RemoveStaleStagingDirs removes only what a maker killed left: a directory named by the prefix and digits, holding
// nothing but what the operation builds there, whose lock no one holds. One in use, one holding anything else, one of
// another name or prefix, and a symbolic link are left as they are.
func TestRemoveStaleStagingDirsRemovesOnlyStaleOnes(t *testing.T) {
	parent := t.TempDir()
	const prefix = ".crewlog-test-"
	dead := func() string { // a staging directory whose maker died with a copy in it
		s, err := NewStagingDir(parent, prefix, "store", "key")
		require.NoError(t, err)
		require.NoError(t, os.Mkdir(filepath.Join(s.Dir, "store"), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(s.Dir, "store", "000001.log"), []byte("x"), 0o600))
		require.NoError(t, os.WriteFile(filepath.Join(s.Dir, "key"), []byte("k"), 0o600))
		s.lock.Close()
		return filepath.Base(s.Dir)
	}
	foreign := dead()
	require.NoError(t, os.WriteFile(filepath.Join(parent, foreign, "notes"), []byte("mine"), 0o600))
	inUse, err := NewStagingDir(parent, prefix, "store")
	require.NoError(t, err)
	defer inUse.Remove()
	stale := dead()
	for _, name := range []string{prefix + "12x", prefix, ".crewlog-other-123", "keep"} {
		require.NoError(t, os.Mkdir(filepath.Join(parent, name), 0o700))
	}
	target := t.TempDir()
	require.NoError(t, os.Symlink(target, filepath.Join(parent, prefix+"999")))

	removed, err := RemoveStaleStagingDirs(parent, prefix, "store", "key")
	require.NoError(t, err)
	require.Equal(t, 1, removed)
	require.NotContains(t, stagingtest.Names(t, parent), stale)
	require.ElementsMatch(t, []string{filepath.Base(inUse.Dir), foreign, prefix + "12x", prefix, ".crewlog-other-123",
		"keep", prefix + "999"}, stagingtest.Names(t, parent))
	require.DirExists(t, target)

	// Nor does a new staging directory of the same prefix remove them; a parent that does not exist has none.
	s, err := NewStagingDir(parent, prefix, "store", "key")
	require.NoError(t, err)
	require.NoError(t, s.Remove())
	require.Len(t, stagingtest.Names(t, parent), 7)
	removed, err = RemoveStaleStagingDirs(filepath.Join(parent, "none"), prefix, "store")
	require.NoError(t, err)
	require.Zero(t, removed)
}

// TestNewSoleStagingDirIsRefusedWhileAnotherIsInUse: a sole staging directory is made when the parent holds none of
// its prefix, or only stale ones (removed), and refused, naming the one there, while another is in use; once that one
// is removed, or its maker dies (its lock let go), the next is made.
func TestNewSoleStagingDirIsRefusedWhileAnotherIsInUse(t *testing.T) {
	parent := t.TempDir()
	const prefix = ".crewlog-test-"
	first, err := NewSoleStagingDir(parent, prefix, "store")
	require.NoError(t, err)
	_, err = NewSoleStagingDir(parent, prefix, "store")
	require.ErrorIs(t, err, ErrStagingInUse)
	require.ErrorContains(t, err, first.Dir)
	other, err := NewSoleStagingDir(parent, ".crewlog-other-", "store") // another prefix is no claim on this one
	require.NoError(t, err)
	require.NoError(t, other.Remove())
	require.NoError(t, first.Remove())

	dead, err := NewSoleStagingDir(parent, prefix, "store")
	require.NoError(t, err)
	require.NoError(t, os.Mkdir(filepath.Join(dead.Dir, "store"), 0o700))
	dead.lock.Close() // its maker died: stale
	next, err := NewSoleStagingDir(parent, prefix, "store")
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Base(next.Dir)}, stagingtest.Names(t, parent), "the stale one is removed")
	require.NoError(t, next.Remove())
	require.Empty(t, stagingtest.Names(t, parent))
}
