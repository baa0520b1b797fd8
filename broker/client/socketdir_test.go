package client

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// The test brokers' socket paths (the fake's here, the real one's in server_test.go) do not grow with the test's
// name: a unix socket path is at most 107 bytes, and t.TempDir's directory holds up to 64 bytes of the name besides
// the temporary directory, so a broker of a long test's name under a temporary directory of 48 bytes was refused.
func TestFakeBrokerSocketPathDoesNotGrowWithTheTestName(t *testing.T) {
	path := newFakeBroker(t, pingHandler()).path
	require.LessOrEqual(t, len(path), len(os.TempDir())+40, "%s under %s", path, os.TempDir())
}
