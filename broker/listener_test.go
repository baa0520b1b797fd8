package broker

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func newServerAt(t *testing.T, path string) *Server {
	t.Helper()
	f := newFixture(t, fixtureOpts{}) // an engine to serve; its own server uses another path
	s, err := New(f.eng, f.log, Options{SocketPath: path, ServerKey: make([]byte, 32)})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func TestListenModes(t *testing.T) {
	base := t.TempDir()
	path := filepath.Join(base, "new", "b.sock")
	s := newServerAt(t, path)
	require.NoError(t, s.Listen())
	fi, err := os.Stat(filepath.Dir(path))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "created directory")
	fi, err = os.Lstat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "socket")
	require.NotZero(t, fi.Mode()&os.ModeSocket)

	// An existing private directory with loose bits is tightened; its parent is never touched.
	loose := filepath.Join(base, "loose")
	require.NoError(t, os.Mkdir(loose, 0o755))
	parentBefore, _ := os.Stat(base)
	s2 := newServerAt(t, filepath.Join(loose, "b.sock"))
	require.NoError(t, s2.Listen())
	fi, _ = os.Stat(loose)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	parentAfter, _ := os.Stat(base)
	require.Equal(t, parentBefore.Mode(), parentAfter.Mode())

	// Close unlinks the socket.
	require.NoError(t, s.Close())
	_, err = os.Lstat(path)
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestListenRefusals(t *testing.T) {
	cases := []struct {
		name  string
		setup func(dir string) string // returns the socket path
		want  string
	}{
		{"symlinked socket path", func(dir string) string {
			p := filepath.Join(dir, "b.sock")
			require.NoError(t, os.Symlink(filepath.Join(dir, "elsewhere"), p))
			return p
		}, "symlink"},
		{"symlinked directory", func(dir string) string {
			real := filepath.Join(dir, "real")
			require.NoError(t, os.Mkdir(real, 0o700))
			require.NoError(t, os.Symlink(real, filepath.Join(dir, "link")))
			return filepath.Join(dir, "link", "b.sock")
		}, "symlink"},
		{"regular file", func(dir string) string {
			p := filepath.Join(dir, "b.sock")
			require.NoError(t, os.WriteFile(p, []byte("x"), 0o600))
			return p
		}, "not a socket"},
		{"sticky shared directory", func(dir string) string {
			shared := filepath.Join(dir, "shared")
			require.NoError(t, os.Mkdir(shared, 0o777))
			require.NoError(t, os.Chmod(shared, 0o777|os.ModeSticky))
			return filepath.Join(shared, "b.sock")
		}, "shared"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "d")
			require.NoError(t, os.Mkdir(dir, 0o700))
			path := tc.setup(dir)
			s := newServerAt(t, path)
			err := s.Listen()
			require.ErrorContains(t, err, tc.want)
			require.ErrorContains(t, err, "broker: ")
		})
	}
}

func TestStaleSocketProbe(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	require.NoError(t, os.Mkdir(dir, 0o700))
	path := filepath.Join(dir, "b.sock")

	// A dead socket file (its listener closed without unlinking) is replaced.
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	require.NoError(t, err)
	ln.SetUnlinkOnClose(false)
	require.NoError(t, ln.Close())
	_, err = os.Lstat(path)
	require.NoError(t, err, "the stale file is still there")
	s := newServerAt(t, path)
	require.NoError(t, s.Listen())

	// A live one is left alone: already serving.
	s2 := newServerAt(t, path)
	require.ErrorContains(t, s2.Listen(), "already serving")
	_, err = os.Lstat(path)
	require.NoError(t, err)
}

func TestOptionsValidate(t *testing.T) {
	o := Options{MaxFrame: 10, OutboundQueueCap: 5, HelloTimeout: -1, MaxConns: -1, AdminDigest: "XYZ",
		ServerKey: []byte("short")}
	err := o.Validate()
	require.Error(t, err)
	for _, want := range []string{"SocketPath", "AdminDigest", "ServerKey", "MaxFrame", "OutboundQueueCap",
		"HelloTimeout", "MaxConns"} {
		require.ErrorContains(t, err, want)
	}
	ok := Options{SocketPath: "/x/b.sock", ServerKey: make([]byte, 32), AdminDigest: digestOf("a")}
	require.NoError(t, ok.Validate())
}
