package daemon

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSecretReplacedAfterTheLook: a secret file that passed the look before its open but was replaced before the
// open (as another process of the uid could) is refused by what was opened: a file group or others may access is not
// read, a directory or a FIFO is not read (nor waited on), a symlink is not followed.
func TestSecretReplacedAfterTheLook(t *testing.T) {
	for _, tc := range []struct {
		name    string
		replace func(t *testing.T, path string)
		want    string
	}{
		{"by a file others may read", func(t *testing.T, p string) {
			require.NoError(t, os.WriteFile(p+".new", []byte("leaked"), 0o600))
			require.NoError(t, os.Chmod(p+".new", 0o644))
			require.NoError(t, os.Rename(p+".new", p))
		}, "has mode 0644"},
		{"by a directory", func(t *testing.T, p string) {
			require.NoError(t, os.Remove(p))
			require.NoError(t, os.Mkdir(p, 0o700))
		}, "is not a regular file"},
		{"by a FIFO", func(t *testing.T, p string) {
			require.NoError(t, os.Remove(p))
			require.NoError(t, syscall.Mkfifo(p, 0o600))
		}, "is not a regular file"},
		{"by a symlink", func(t *testing.T, p string) {
			target := filepath.Join(t.TempDir(), "elsewhere")
			require.NoError(t, os.WriteFile(target, []byte("elsewhere"), 0o600))
			require.NoError(t, os.Remove(p))
			require.NoError(t, os.Symlink(target, p))
		}, "too many levels of symbolic links"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, AdminTokenFile)
			require.NoError(t, os.WriteFile(path, []byte("tok"), 0o600))
			t.Cleanup(func() { beforeOpenSecret = func(string) {} })
			beforeOpenSecret = func(p string) {
				beforeOpenSecret = func(string) {}
				tc.replace(t, p)
			}
			tok, err := AdminToken(dir)
			require.ErrorContains(t, err, tc.want)
			require.Empty(t, tok)
		})
	}
}
