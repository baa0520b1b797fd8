package daemon

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// makeLooseDirFirst has the next private directory crewd makes made first, mode 0777, as another user could in a
// shared parent such as /tmp between crewd's look and its mkdir.
func makeLooseDirFirst(t *testing.T) {
	t.Helper()
	t.Cleanup(func() { beforeMakeDir = func(string) {} })
	beforeMakeDir = func(dir string) {
		require.NoError(t, os.Mkdir(dir, 0o777))
		require.NoError(t, os.Chmod(dir, 0o777)) // past the umask
	}
}

// TestPrivateDirMadeMeanwhileIsRefused: a data directory that did not exist when crewd (or crewctl token) looked,
// but that someone else made before crewd did, is refused like any other loose directory, not taken as crewd's own.
func TestPrivateDirMadeMeanwhileIsRefused(t *testing.T) {
	t.Run("crewd start", func(t *testing.T) {
		c := testConfig(t)
		c.MinFreeBytes = 1 << 62 // a start that got past the directory stops here, before it opens the store
		makeLooseDirFirst(t)
		err := Run(context.Background(), c, io.Discard, discard())
		require.ErrorContains(t, err, "has mode 0777")
		require.NoFileExists(t, filepath.Join(c.DataDir, AdminTokenFile), "nothing was written")
	})
	t.Run("read-only token file", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "data")
		makeLooseDirFirst(t)
		_, _, err := CreateReadOnlyToken(dir, "ci", time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
		require.ErrorContains(t, err, "has mode 0777")
		require.NoFileExists(t, filepath.Join(dir, ReadOnlyTokensFile), "nothing was written")
	})
}

// TestMakePrivateDirSyncsWhatItMade: MakePrivateDir made the data directory, and any missing parent, without syncing
// their entries, so crewctl token create into a new data directory printed a token that a crash right after could
// undo with the directory, and crewd wrote its secrets into a directory a crash could take away. A sync of a
// directory that holds one it made that fails now fails it, and no token is given out.
func TestMakePrivateDirSyncsWhatItMade(t *testing.T) {
	for _, tc := range []struct {
		name   string
		failed func(root string) string
	}{
		{"the data directory's parent", func(root string) string { return filepath.Join(root, "a") }},
		{"a parent it made's parent", func(root string) string { return root }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			failed := tc.failed(root)
			errSync := errors.New("sync: input/output error")
			syncFile = func(f *os.File) error {
				if f.Name() == failed {
					return errSync
				}
				return f.Sync()
			}
			t.Cleanup(func() { syncFile = (*os.File).Sync })
			tok, _, err := CreateReadOnlyToken(filepath.Join(root, "a", "data"), "ci", time.Now())
			require.ErrorIs(t, err, errSync)
			require.Empty(t, tok)
		})
	}
}

// TestRunRefusesAStoreThatIsNotADirectory: a store that is a file (or a symbolic link to one) is refused before
// anything is written, naming it, where Pebble would be left to fail on it with an error about a file inside it.
func TestRunRefusesAStoreThatIsNotADirectory(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(store string) error
	}{
		{"a file", func(store string) error { return os.WriteFile(store, []byte("x"), 0o600) }},
		{"a symbolic link to a file", func(store string) error {
			file := filepath.Join(filepath.Dir(store), "elsewhere")
			if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
				return err
			}
			return os.Symlink(file, store)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig(t)
			require.NoError(t, os.MkdirAll(c.DataDir, 0o700))
			store := filepath.Join(c.DataDir, StoreDir)
			require.NoError(t, tc.make(store))
			// NB: runUntilServed, not Run: a store let through must fail the test, not have crewd serve until the
			// test binary's timeout.
			served, err := runUntilServed(c)
			require.False(t, served)
			require.ErrorContains(t, err, "daemon: "+store+" is not a directory")
			require.NoFileExists(t, filepath.Join(c.DataDir, AdminTokenFile), "nothing was written")
		})
	}
}
