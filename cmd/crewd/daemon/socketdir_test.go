package daemon

import (
	"testing"

	"github.com/crewlog/crewlog/broker/brokertest"
)

// The test daemons' socket paths (testConfig's and startCrewd's) do not grow with the test's name: a unix socket path
// is at most 107 bytes, and t.TempDir's directory holds up to 64 bytes of the name besides the temporary directory,
// so under a temporary directory of 48 bytes the frame-cap follow test's crewd could not listen and its client not
// dial (connect: invalid argument).
func TestTestConfigSocketPathDoesNotGrowWithTheTestName(t *testing.T) {
	brokertest.RequireSocketPathsShort(t, func(t *testing.T) []string { return []string{testConfig(t).SocketPath} })
}
