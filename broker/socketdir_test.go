package broker

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The fixture's socket path does not grow with the test's name: a unix socket path is at most 107 bytes, and
// t.TempDir's directory holds up to 64 bytes of the name besides the temporary directory, so a fixture of a long
// subtest's name under a temporary directory of 30 bytes was refused (SocketPath is 108 bytes).
func TestFixtureSocketPathDoesNotGrowWithTheTestName(t *testing.T) {
	t.Run(strings.Repeat("a_subtest_of_a_long_name_", 4), func(t *testing.T) {
		f := newFixture(t, fixtureOpts{})
		got := f.srv.opts.SocketPath
		require.LessOrEqual(t, len(got), len(os.TempDir())+40, "%s under %s", got, os.TempDir())
	})
}
