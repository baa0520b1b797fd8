package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

func mode(t *testing.T, path string) os.FileMode {
	fi, err := os.Lstat(path)
	require.NoError(t, err)
	return fi.Mode().Perm()
}

func TestSecretsCreatedOnceAndReused(t *testing.T) {
	dir := t.TempDir()
	tok, err := AdminToken(dir)
	require.NoError(t, err)
	require.Len(t, tok, 64)
	key, err := ServerKey(dir)
	require.NoError(t, err)
	require.Len(t, key, 32)
	require.Equal(t, os.FileMode(0o600), mode(t, filepath.Join(dir, AdminTokenFile)))
	require.Equal(t, os.FileMode(0o600), mode(t, filepath.Join(dir, ServerKeyFile)))

	tok2, err := AdminToken(dir)
	require.NoError(t, err)
	require.Equal(t, tok, tok2, "the token is reused")
	key2, err := ServerKey(dir)
	require.NoError(t, err)
	require.Equal(t, key, key2, "the key is reused")

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 2, "no temporary file is left behind")

	other, err := AdminToken(t.TempDir())
	require.NoError(t, err)
	require.NotEqual(t, tok, other, "tokens are random")
	require.Len(t, Digest(tok), 64)
}

func TestSecretsUmaskDoesNotWiden(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o777))
	_, err := AdminToken(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), mode(t, filepath.Join(dir, AdminTokenFile)))
}

// withMode writes a secret file and then sets its mode, which the umask would otherwise narrow.
func withMode(m os.FileMode) func(t *testing.T, p string) {
	return func(t *testing.T, p string) {
		require.NoError(t, os.WriteFile(p, []byte("tok"), 0o600))
		require.NoError(t, os.Chmod(p, m))
	}
}

func TestSecretsRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, path string)
		want  string
	}{
		{"group readable", withMode(0o640), "has mode 0640"},
		{"world readable", withMode(0o604), "has mode 0604"},
		{"group writable", withMode(0o620), "has mode 0620"},
		{"group executable", withMode(0o610), "has mode 0610"},
		{"world writable", withMode(0o602), "has mode 0602"},
		{"world executable", withMode(0o601), "has mode 0601"},
		{"symlink", func(t *testing.T, p string) {
			target := filepath.Join(t.TempDir(), "elsewhere")
			require.NoError(t, os.WriteFile(target, []byte("tok"), 0o600))
			require.NoError(t, os.Symlink(target, p))
		}, "is a symlink"},
		{"directory", func(t *testing.T, p string) { require.NoError(t, os.Mkdir(p, 0o700)) }, "not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, name := range []string{AdminTokenFile, ServerKeyFile} {
				tc.setup(t, filepath.Join(dir, name))
			}
			_, err := AdminToken(dir)
			require.ErrorContains(t, err, tc.want)
			require.ErrorContains(t, err, "daemon: ")
			_, err = ServerKey(dir)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestSecretsBadContent(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, AdminTokenFile), []byte("two words\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ServerKeyFile), []byte("short"), 0o600))
	_, err := AdminToken(dir)
	require.ErrorContains(t, err, "must hold one token")
	_, err = ServerKey(dir)
	require.ErrorContains(t, err, "holds 5 bytes")

	require.NoError(t, os.WriteFile(filepath.Join(dir, AdminTokenFile), []byte("  my-token\n"), 0o600))
	tok, err := AdminToken(dir)
	require.NoError(t, err)
	require.Equal(t, "my-token", tok, "a hand-written token is accepted, trimmed")
}

// TestSecretsFailedSyncLinksNothing: a secret whose write or sync failed is never linked into place, so a full
// disk cannot leave an empty or partial token behind. A forced sync error works as root, unlike a read-only dir.
func TestSecretsFailedSyncLinksNothing(t *testing.T) {
	dir := t.TempDir()
	errSync := errors.New("sync: no space left on device")
	syncFile = func(*os.File) error { return errSync }
	t.Cleanup(func() { syncFile = (*os.File).Sync })

	_, err := AdminToken(dir)
	require.ErrorIs(t, err, errSync)
	require.ErrorContains(t, err, "daemon: write")
	_, err = ServerKey(dir)
	require.ErrorIs(t, err, errSync)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "neither a secret nor a temporary file is left behind")
}

// TestSecretsCreateFails: the data directory is a regular file, which fails creation for root too.
func TestSecretsCreateFails(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(dir, nil, 0o600))
	_, err := AdminToken(dir)
	require.ErrorIs(t, err, syscall.ENOTDIR)
}

// TestTokenFileBoundIsInBytes: a token file's token is bounded in bytes (MaxTokenLen), which its refusal names, where
// it said chars: a hand-written token of 129 two-byte chars was refused as longer than 256 chars.
func TestTokenFileBoundIsInBytes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, AdminTokenFile)
	require.NoError(t, os.WriteFile(path, []byte(strings.Repeat("é", MaxTokenLen/2)), 0o600))
	_, err := AdminToken(dir)
	require.NoError(t, err, "256 bytes")
	require.NoError(t, os.WriteFile(path, []byte(strings.Repeat("é", MaxTokenLen/2+1)), 0o600))
	_, err = AdminToken(dir)
	require.ErrorContains(t, err, fmt.Sprintf("must hold one token of 1..%d bytes", MaxTokenLen))
}
