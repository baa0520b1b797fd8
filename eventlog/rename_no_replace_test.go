package eventlog

import (
	iofs "io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/crewlog/crewlog/eventlog/stagingtest"
)

// madeAt are the things a destination may be when another process makes it where a rename is to put a copy: each
// makes one at a path.
var madeAt = []struct {
	name string
	make func(t *testing.T, p string)
}{
	{"an empty directory", func(t *testing.T, p string) { require.NoError(t, os.Mkdir(p, 0o755)) }},
	{"a directory holding a file", func(t *testing.T, p string) {
		require.NoError(t, os.Mkdir(p, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(p, "theirs"), []byte("theirs"), 0o644))
	}},
	{"a file", func(t *testing.T, p string) { require.NoError(t, os.WriteFile(p, []byte("theirs"), 0o644)) }},
	{"a dangling symbolic link", func(t *testing.T, p string) { require.NoError(t, os.Symlink("nowhere", p)) }},
}

// snapshotOf is what is at p, for a test to see that it was left as it was: its type, and a file's bytes, a
// directory's entries or a link's target.
func snapshotOf(t *testing.T, p string) string {
	t.Helper()
	st, err := os.Lstat(p)
	require.NoError(t, err)
	switch {
	case st.IsDir():
		return "dir " + filepath.Join(stagingtest.Names(t, p)...)
	case st.Mode()&os.ModeSymlink != 0:
		target, err := os.Readlink(p)
		require.NoError(t, err)
		return "link " + target
	}
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	return "file " + string(b)
}

// TestRenameNoReplace: a rename onto a destination that is there, whatever it is, is refused (fs.ErrExist) and
// leaves both as they were; onto one that is not, it renames. Where the kernel or the file system cannot rename so
// (EINVAL, ENOSYS), the destination is checked, then renamed onto.
func TestRenameNoReplace(t *testing.T) {
	for _, kernel := range []struct {
		name     string
		renameat error // what renameat2 answers instead of renaming (nil: the kernel's answer)
	}{
		{"renameat2", nil},
		{"no renameat2", unix.ENOSYS},
		{"a file system without RENAME_NOREPLACE", unix.EINVAL},
	} {
		t.Run(kernel.name, func(t *testing.T) {
			if kernel.renameat != nil {
				was := renameat2
				t.Cleanup(func() { renameat2 = was })
				renameat2 = func(int, string, int, string, uint) error { return kernel.renameat }
			}
			dir := t.TempDir()
			from := filepath.Join(dir, "copy")
			copied := func() {
				require.NoError(t, os.MkdirAll(from, 0o700))
				require.NoError(t, os.WriteFile(filepath.Join(from, "ours"), []byte("ours"), 0o600))
			}
			copied()
			to := filepath.Join(dir, "nothing there")
			require.NoError(t, RenameNoReplace(from, to))
			require.Equal(t, "dir ours", snapshotOf(t, to))
			require.NoDirExists(t, from)

			for _, there := range madeAt {
				copied()
				to := filepath.Join(dir, there.name)
				there.make(t, to)
				was := snapshotOf(t, to)
				err := RenameNoReplace(from, to)
				require.ErrorIs(t, err, iofs.ErrExist, there.name)
				require.Equal(t, was, snapshotOf(t, to), "%s is left as it was", there.name)
				require.Equal(t, "dir ours", snapshotOf(t, from), "the copy is left where it was")
			}
		})
	}
}

// TestCheckpointDoesNotReplaceWhatIsMadeBeforeItsPlace: Checkpoint checked that its destination did not exist, then
// renamed its copy onto it (os.Rename), and rename(2) replaces an empty directory: one made between the two (by
// another user, in a shared directory such as the temp directory) was refused only by os.Rename's own check, a moment
// before the rename, and a file or a symbolic link made there failed the checkpoint as "not a directory", which the
// broker answered as an internal error. Whatever is made there since the check is refused as existing
// (fs.ErrExist), in the rename itself, and left as it was, and the checkpoint leaves nothing behind.
func TestCheckpointDoesNotReplaceWhatIsMadeBeforeItsPlace(t *testing.T) {
	l, err := Open(filepath.Join(t.TempDir(), "store"), nil)
	require.NoError(t, err)
	defer l.Close()
	_, err = l.Append(Write{CommandID: "a", Events: evs("A", 3)})
	require.NoError(t, err)
	for _, there := range madeAt {
		t.Run(there.name, func(t *testing.T) {
			parent := t.TempDir()
			dest := filepath.Join(parent, "copy")
			hook := checkpointStaged
			t.Cleanup(func() { checkpointStaged = hook })
			var made string
			checkpointStaged = func(string) { // after Checkpoint's check, before the move
				there.make(t, dest)
				made = snapshotOf(t, dest)
			}
			require.ErrorIs(t, l.Checkpoint(dest), iofs.ErrExist)
			require.NotEmpty(t, made, "made in the window")
			require.Equal(t, made, snapshotOf(t, dest), "what was made is left as it was")
			require.Equal(t, []string{"copy"}, stagingtest.Names(t, parent), "no staging is left")
		})
	}
}
