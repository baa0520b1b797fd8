package natslog

import (
	"fmt"
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
	takenPort := taken.Addr().(*net.TCPAddr).Port
	calls := 0
	reservePorts = func(n int) ([]int, error) {
		calls++
		ports, err := freePorts(n)
		if calls == 1 && err == nil {
			ports[0] = takenPort // node 0's client port, in use
			readyTimeout = 2 * time.Second
		} else {
			// A loaded machine (packages tested at once) may take longer than the first attempt's short wait.
			readyTimeout = 10 * time.Second
		}
		return ports, err
	}
	t.Cleanup(func() { reservePorts, readyTimeout = freePorts, 10*time.Second })

	c, err := StartCluster(filepath.Join(t.TempDir(), "nats"), 3)
	require.NoError(t, err)
	t.Cleanup(c.Shutdown)
	// At least the first ports, then fresh ones: another process may take a fresh port too, and the cluster then
	// starts once more.
	require.GreaterOrEqual(t, calls, 2, "the first ports, then fresh ones")
	require.NotEqual(t, takenPort, c.opts[0].Port, "node 0 listens on a fresh port")
	for _, s := range c.Servers {
		require.NotNil(t, s)
	}
}

// A node restarted while something holds one of its ports (a connection given it as its own port while the node
// was stopped) starts once the port is free, instead of failing.
func TestRestartWaitsForItsPorts(t *testing.T) {
	c, err := StartCluster(filepath.Join(t.TempDir(), "nats"), 3)
	require.NoError(t, err)
	t.Cleanup(c.Shutdown)
	c.Stop(0)

	holder, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", c.opts[0].ClusterPort))
	require.NoError(t, err)
	freed := make(chan struct{})
	time.AfterFunc(500*time.Millisecond, func() { close(freed); holder.Close() })
	require.NoError(t, c.Restart(0))
	select {
	case <-freed:
	default:
		t.Fatal("the node restarted while its cluster port was held")
	}
	require.NotNil(t, c.Servers[0])
	require.True(t, c.Servers[0].ReadyForConnections(time.Second))

	// A port that stays taken fails the restart, named.
	c.Stop(0)
	client, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", c.opts[0].Port))
	require.NoError(t, err)
	defer client.Close()
	portWait = 200 * time.Millisecond
	t.Cleanup(func() { portWait = 30 * time.Second })
	err = c.Restart(0)
	require.ErrorContains(t, err, fmt.Sprintf("port %d of a stopped node is taken", c.opts[0].Port))
	require.Nil(t, c.Servers[0])
}
