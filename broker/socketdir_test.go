package broker

import (
	"testing"

	"github.com/crewlog/crewlog/broker/brokertest"
)

// The fixture's socket path does not grow with the test's name: a unix socket path is at most 107 bytes, and
// t.TempDir's directory holds up to 64 bytes of the name besides the temporary directory, so a fixture of a long
// subtest's name under a temporary directory of 30 bytes was refused (SocketPath is 108 bytes).
func TestFixtureSocketPathDoesNotGrowWithTheTestName(t *testing.T) {
	brokertest.RequireSocketPathsShort(t, func(t *testing.T) []string {
		return []string{newFixture(t, fixtureOpts{}).srv.opts.SocketPath}
	})
}
