package broker

import (
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/eventlog"
)

func TestAdminCheckpoint(t *testing.T) {
	f := newFixture(t, fixtureOpts{disk: true})
	s := f.seed()
	head, _ := f.log.Head()
	a := f.dial()
	a.helloAdmin()
	dir := filepath.Join(t.TempDir(), "copy")

	res := a.ok(methodAdminCheckpoint, map[string]any{"dir": dir})
	require.Equal(t, dir, res["dir"])
	require.EqualValues(t, head, res["head"])
	// The daemon's key is named, not shown: its id is neither the key nor any encoding of it, and another key has
	// another id.
	key := f.srv.opts.ServerKey
	require.Equal(t, ServerKeyID(key), res["serverKeyId"])
	require.Regexp(t, "^[0-9a-f]{64}$", res["serverKeyId"])
	require.NotContains(t, res["serverKeyId"], hex.EncodeToString(key))
	require.NotEqual(t, ServerKeyID([]byte("another key of thirty-two bytes!")), res["serverKeyId"])
	// The copy is private whatever the umask (the test's is usually 022): directories 0700, files 0600.
	files := 0
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		fi, err := d.Info()
		require.NoError(t, err)
		want := os.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		} else {
			files++
		}
		require.Equal(t, want, fi.Mode().Perm(), p)
		return nil
	}))
	require.Positive(t, files)
	entries, err := os.ReadDir(filepath.Dir(dir))
	require.NoError(t, err)
	require.Len(t, entries, 1, "no staging directory is left behind")
	l, err := eventlog.Open(dir, &eventlog.Options{ReadOnly: true})
	require.NoError(t, err)
	rep, err := l.Verify(nil)
	require.NoError(t, err)
	require.GreaterOrEqual(t, rep.Head, head)
	require.NoError(t, l.Close())

	// NB: each refusal is told by its message: "relative/copy" has no parent either, which would refuse it too.
	for _, tc := range []struct{ dir, message string }{
		{dir: dir, message: "exists; name a new directory"},
		{dir: "relative/copy", message: "dir must be an absolute path"},
		{dir: filepath.Join(dir+"-none", "x"), message: "is not a directory"},
	} {
		e := a.fails(methodAdminCheckpoint, map[string]any{"dir": tc.dir}, wire.CodeBadParams)
		require.Contains(t, e.Message, tc.message, tc.dir)
	}
	a.fails(methodAdminCheckpoint, map[string]any{}, wire.CodeBadParams)
	a.fails(methodAdminCheckpoint, map[string]any{"dir": dir + "2", "extra": 1}, wire.CodeBadParams)
	_, err = os.Stat(dir + "2")
	require.ErrorIs(t, err, os.ErrNotExist)

	o := f.dial()
	o.hello(runR, "orchestrator", s.orch)
	o.fails(methodAdminCheckpoint, map[string]any{"dir": dir + "3"}, wire.CodeForbidden)
	_, err = os.Stat(dir + "3")
	require.ErrorIs(t, err, os.ErrNotExist)
}

// TestAdminCheckpointInsideTheStoreIsRefused: a dir inside the daemon's own store (by its path or through a symbolic
// link) was written: a directory among Pebble's files, which restore, copying a store's files one by one, then refuses,
// and which goes with the store when it is removed. crewctl backup refuses such a dir before it asks; the daemon
// refuses it too, for any admin.
func TestAdminCheckpointInsideTheStoreIsRefused(t *testing.T) {
	f := newFixture(t, fixtureOpts{disk: true})
	f.seed()
	a := f.dial()
	a.helloAdmin()
	link := filepath.Join(t.TempDir(), "link")
	require.NoError(t, os.Symlink(f.dir, link))
	for _, dir := range []string{filepath.Join(f.dir, "copy"), filepath.Join(link, "copy")} {
		e := a.fails(methodAdminCheckpoint, map[string]any{"dir": dir}, wire.CodeBadParams)
		require.Contains(t, e.Message, "is inside the store; name a directory outside it", dir)
		require.NoDirExists(t, dir)
	}
	entries, err := os.ReadDir(f.dir)
	require.NoError(t, err)
	for _, e := range entries {
		require.True(t, e.Type().IsRegular(), "%s in the store", e.Name())
	}
	a.ok(methodAdminCheckpoint, map[string]any{"dir": filepath.Join(filepath.Dir(f.dir), "copy")}) // beside it is fine

	// NB: whatever the disk holds: a full one does not make such a dir a matter of space.
	replaceFreeSpace(t, func(string) (uint64, error) { return 0, nil })
	e := a.fails(methodAdminCheckpoint, map[string]any{"dir": filepath.Join(link, "copy")}, wire.CodeBadParams)
	require.Contains(t, e.Message, "is inside the store; name a directory outside it")
	a.fails(methodAdminCheckpoint, map[string]any{"dir": filepath.Join(filepath.Dir(f.dir), "copy2")}, wire.CodeDiskFull)
}

// TestAdminCheckpointOfADirMadeMeanwhileIsRefusedAsExisting: a dir made after admin.checkpoint checked that it did
// not exist (by another user, in a shared directory such as the temp directory), before the copy was moved there, was
// refused by the log's own check, or by the move, as an internal error where the method answers bad-params for a dir
// that exists. It is bad-params, dir exists, and what was made is left as it was.
func TestAdminCheckpointOfADirMadeMeanwhileIsRefusedAsExisting(t *testing.T) {
	f := newFixture(t, fixtureOpts{disk: true})
	f.seed()
	for _, tc := range []struct {
		name string
		make func(p string) error
	}{
		{"a directory", func(p string) error { return os.Mkdir(p, 0o755) }},
		{"a file", func(p string) error { return os.WriteFile(p, []byte("theirs"), 0o644) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := f.dialAs(t)
			a.helloAdmin()
			dir := filepath.Join(t.TempDir(), "copy")
			made := make(chan error, 1)
			replaceFreeSpace(t, func(p string) (uint64, error) { // after the handler's check, before the copy
				made <- tc.make(dir)
				return eventlog.FreeSpace(p)
			})
			e := a.fails(methodAdminCheckpoint, map[string]any{"dir": dir}, wire.CodeBadParams)
			require.NoError(t, recv(t, made, "making of the directory in the free-space check"))
			require.Contains(t, e.Message, "exists; name a new directory")
			entries, err := os.ReadDir(filepath.Dir(dir))
			require.NoError(t, err)
			require.Len(t, entries, 1, "no staging directory is left behind")
			st, err := os.Lstat(dir)
			require.NoError(t, err)
			if st.IsDir() {
				entries, err = os.ReadDir(dir)
				require.NoError(t, err)
				require.Empty(t, entries, "the directory made is left as it was")
			} else {
				b, err := os.ReadFile(dir)
				require.NoError(t, err)
				require.Equal(t, "theirs", string(b), "the file made is left as it was")
			}
		})
	}
}
