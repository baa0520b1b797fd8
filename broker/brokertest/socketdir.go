// Package brokertest holds what the tests of packages that serve or reach a broker socket, or its HTTP API, share:
// a socket directory of a short path, and waits bounded so that a hang fails naming what it waited for.
package brokertest

import (
	"os"
	"strings"
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

// RequireSocketPathsShort runs paths under a subtest of a long name and requires every socket path it returns to lie
// within 40 bytes of the temporary directory: a fixture whose socket path grew with the test's name (t.TempDir) was
// refused, or could not bind, under a TMPDIR of 30–48 bytes.
func RequireSocketPathsShort(t *testing.T, paths func(t *testing.T) []string) {
	t.Helper()
	t.Run(strings.Repeat("a_subtest_of_a_long_name_", 4), func(t *testing.T) {
		for _, got := range paths(t) {
			require.LessOrEqual(t, len(got), len(os.TempDir())+40, "%s under %s", got, os.TempDir())
		}
	})
}
