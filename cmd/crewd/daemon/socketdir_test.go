package daemon

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The test daemons' socket paths (testConfig's and startCrewd's) do not grow with the test's name: a unix socket path
// is at most 107 bytes, and t.TempDir's directory holds up to 64 bytes of the name besides the temporary directory,
// so under a temporary directory of 48 bytes the frame-cap follow test's crewd could not listen and its client not
// dial (connect: invalid argument).
func TestTestConfigSocketPathDoesNotGrowWithTheTestName(t *testing.T) {
	t.Run(strings.Repeat("a_subtest_of_a_long_name_", 4), func(t *testing.T) {
		got := testConfig(t).SocketPath
		require.LessOrEqual(t, len(got), len(os.TempDir())+40, "%s under %s", got, os.TempDir())
	})
}
