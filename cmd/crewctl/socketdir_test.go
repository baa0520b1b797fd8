package main

import (
	"testing"

	"github.com/crewlog/crewlog/broker/brokertest"
)

// The live daemon's socket path does not grow with the test's name: a unix socket path is at most 107 bytes, and
// t.TempDir's directory holds up to 64 bytes of the name besides the temporary directory, so under a temporary
// directory of 48 bytes three tests' daemons were refused (SocketPath is 113 bytes) and one test's listener could not
// bind (invalid argument).
func TestLiveDaemonSocketPathDoesNotGrowWithTheTestName(t *testing.T) {
	brokertest.RequireSocketPathsShort(t, func(t *testing.T) []string {
		_, got := liveDaemon(t)
		return []string{got}
	})
}
