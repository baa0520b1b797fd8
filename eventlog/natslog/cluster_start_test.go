package natslog

import (
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A port reserved for a node and taken before the node binds it (by another process's connection) does not fail
// the cluster: it starts again on fresh ports.
func TestClusterStartsAgainWhenAPortWasTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	calls := 0
	reservePorts = func(n int) ([]int, error) {
		calls++
		ports, err := freePorts(n)
		if calls == 1 && err == nil {
			ports[0] = taken.Addr().(*net.TCPAddr).Port // node 0's client port, in use
		}
		return ports, err
	}
	readyTimeout = 2 * time.Second
	t.Cleanup(func() { reservePorts, readyTimeout = freePorts, 10*time.Second })

	c, err := StartCluster(filepath.Join(t.TempDir(), "nats"), 3)
	require.NoError(t, err)
	t.Cleanup(c.Shutdown)
	require.Equal(t, 2, calls, "the first ports, then fresh ones")
	for _, s := range c.Servers {
		require.NotNil(t, s)
	}
}
