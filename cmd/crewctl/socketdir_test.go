package main

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The live daemon's socket path does not grow with the test's name: a unix socket path is at most 107 bytes, and
// t.TempDir's directory holds up to 64 bytes of the name besides the temporary directory, so under a temporary
// directory of 48 bytes three tests' daemons were refused (SocketPath is 113 bytes) and one test's listener could not
// bind (invalid argument).
func TestLiveDaemonSocketPathDoesNotGrowWithTheTestName(t *testing.T) {
	t.Run(strings.Repeat("a_subtest_of_a_long_name_", 4), func(t *testing.T) {
		_, got := liveDaemon(t)
		require.LessOrEqual(t, len(got), len(os.TempDir())+40, "%s under %s", got, os.TempDir())
	})
}
