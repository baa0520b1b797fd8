package integration

import (
	"testing"

	"github.com/crewlog/crewlog/broker/brokertest"
	"github.com/crewlog/crewlog/broker/wire"
)

// The test daemons' and the closing broker's socket paths do not grow with the test's name: a unix socket path is
// at most 107 bytes, and t.TempDir's directory holds up to 64 bytes of the name besides the temporary directory, so
// under a temporary directory of 48 bytes crewd refused the --socket of tests of long names.
func TestSocketPathsDoNotGrowWithTheTestName(t *testing.T) {
	brokertest.RequireSocketPathsShort(t, func(t *testing.T) []string {
		none := func(string, string, int) *wire.Error { return nil }
		return []string{newDaemon(t).socket, newClosingBroker(t, none).socket}
	})
}
