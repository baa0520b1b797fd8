package integration

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
)

// The test daemons' and the closing broker's socket paths do not grow with the test's name: a unix socket path is
// at most 107 bytes, and t.TempDir's directory holds up to 64 bytes of the name besides the temporary directory, so
// under a temporary directory of 48 bytes crewd refused the --socket of tests of long names.
func TestSocketPathsDoNotGrowWithTheTestName(t *testing.T) {
	t.Run(strings.Repeat("a_subtest_of_a_long_name_", 4), func(t *testing.T) {
		none := func(string, string, int) *wire.Error { return nil }
		for _, got := range []string{newDaemon(t).socket, newClosingBroker(t, none).socket} {
			require.LessOrEqual(t, len(got), len(os.TempDir())+40, "%s under %s", got, os.TempDir())
		}
	})
}
