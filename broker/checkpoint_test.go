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

	a.fails(methodAdminCheckpoint, map[string]any{"dir": dir}, wire.CodeBadParams)                             // exists
	a.fails(methodAdminCheckpoint, map[string]any{"dir": "relative/copy"}, wire.CodeBadParams)                 // not absolute
	a.fails(methodAdminCheckpoint, map[string]any{"dir": filepath.Join(dir+"-none", "x")}, wire.CodeBadParams) // no parent
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
