// Package brokertest holds what the tests of packages that serve or reach a broker socket share.
package brokertest

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// SocketDir is a directory for a test's unix socket, removed when the test ends. NB: not t.TempDir, whose name holds
// up to 64 bytes of the test's: a unix socket path is at most 107 bytes, and a long test name under a TMPDIR of 30–48
// bytes took the path past it.
func SocketDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "crewlog-sock-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
