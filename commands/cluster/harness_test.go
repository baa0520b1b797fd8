package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/eventlog/natslog"
	"github.com/crewlog/crewlog/projections"
)

// testLogger logs the nodes' role changes and failures to stderr with
// CREWLOG_CLUSTER_DEBUG=1.
var testLogger = func() *slog.Logger {
	if os.Getenv("CREWLOG_CLUSTER_DEBUG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, nil))
}()

var testLog = natslog.Config{Stream: "CREWLOG", Replicas: 3, PublishTimeout: 5 * time.Second}

// crewd is one crewd slot of the test cluster: a data directory, and the
// node running on it while it is up. A node that fails is restarted on the
// same directory, as a supervisor restarts a crewd that exited.
type crewd struct {
	t     *testing.T
	name  string
	dir   string
	urls  string
	index int

	mu      sync.Mutex
	node    *Node
	closer  func() // closes the node's connection and log
	down    bool   // killed by the test: not restarted until start
	starts  int
	started chan struct{} // closed and replaced at every start
}

// start starts the crewd, trying again for a while as a supervisor would:
// right after a fault the stream may have no leader to answer a copier.
func (c *crewd) start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = false
	var err error
	for attempt := 0; attempt < 50; attempt++ {
		if err = c.startLocked(); err == nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return err
}

func (c *crewd) startLocked() error {
	nc, err := natslog.Connect(c.urls, natslog.ConnectOptions{Name: c.name})
	if err != nil {
		return err
	}
	local, err := eventlog.Open(c.dir, nil)
	if err != nil {
		nc.Close()
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// NB: crewds publish early (EarlyStaging) on every other start, crewd0
	// not at its first, crewd1 at its first, …: the writers of one run use
	// both ways of handing a group to the stream.
	n, err := Start(ctx, local, Options{Name: fmt.Sprintf("%s-%d", c.name, c.starts), Conn: nc, Log: testLog,
		LeaseTTL: time.Second, EarlyStaging: (c.index+c.starts)%2 == 1, Engine: commands.Options{SnapshotEvery: 500},
		Logger: testLogger})
	if err != nil {
		local.Close()
		nc.Close()
		return err
	}
	c.starts++
	c.node = n
	c.closer = func() { nc.Close(); local.Close() }
	if c.started != nil {
		close(c.started)
	}
	c.started = make(chan struct{})
	go c.restartOnFailure(n)
	return nil
}

// restartOnFailure restarts the node when it fails stop (fenced, lease
// lost, copy error). Errors are reported by the checks at the end: a crewd
// that is down has no copy to compare.
func (c *crewd) restartOnFailure(n *Node) {
	<-n.Failed()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.node != n || c.down {
		return
	}
	c.stopLocked(false)
	// NATS may be without a quorum for a moment: try again, as a
	// supervisor would.
	for c.startLocked() != nil {
		c.mu.Unlock()
		time.Sleep(200 * time.Millisecond)
		c.mu.Lock()
		if c.down || c.node != nil {
			return
		}
	}
}

// kill stops the crewd as a crash would: its connection drops first, so
// it neither publishes nor gives up the lease.
func (c *crewd) kill() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = true
	c.stopLocked(true)
}

func (c *crewd) stopLocked(crash bool) {
	if c.node == nil {
		return
	}
	n, closer := c.node, c.closer
	c.node = nil
	if crash {
		n.o.Conn.Close()
	}
	n.Close()
	closer()
}

// running waits until the crewd runs (restarted after a failure) and
// returns its node.
func (c *crewd) running(t *testing.T) *Node {
	t.Helper()
	for {
		c.mu.Lock()
		n, ch := c.node, c.started
		c.mu.Unlock()
		if n != nil {
			return n
		}
		select {
		case <-ch:
		case <-time.After(60 * time.Second):
			t.Fatalf("%s did not restart", c.name)
		}
	}
}

// current is the running node, or nil.
func (c *crewd) current() *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.node
}

// testCluster is 3 NATS servers and 3 crewds.
type testCluster struct {
	nats   *natslog.Cluster
	crewds []*crewd
}

func startTestCluster(t *testing.T) *testCluster {
	t.Helper()
	dir := t.TempDir()
	nc, err := natslog.StartCluster(filepath.Join(dir, "nats"), 3)
	require.NoError(t, err)
	tc := &testCluster{nats: nc}
	t.Cleanup(func() {
		for _, c := range tc.crewds {
			c.kill()
		}
		nc.Shutdown()
	})
	for i := range 3 {
		c := &crewd{t: t, name: fmt.Sprintf("crewd%d", i), dir: filepath.Join(dir, fmt.Sprintf("crewd%d", i)),
			urls: nc.URLs(), index: i}
		require.NoError(t, c.start())
		tc.crewds = append(tc.crewds, c)
	}
	return tc
}

// writer waits for a crewd to be the writer and returns it with when it
// was elected.
func (tc *testCluster) writer(t *testing.T, timeout time.Duration) (int, time.Time) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		var elected []<-chan struct{}
		for i, c := range tc.crewds {
			if n := c.current(); n != nil {
				if n.Writer() {
					return i, n.ElectedAt()
				}
				elected = append(elected, n.Elected())
			}
		}
		// Wake on any election, or recheck soon: a node may be restarted
		// meanwhile, with a new channel.
		wake := make(chan struct{})
		stop := make(chan struct{})
		for _, ch := range elected {
			go func() {
				select {
				case <-ch:
					select {
					case wake <- struct{}{}:
					case <-stop:
					}
				case <-stop:
				}
			}()
		}
		select {
		case <-wake:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			close(stop)
			t.Fatalf("no writer within %v", timeout)
		}
		close(stop)
	}
}

// caughtUp waits until every running crewd holds the stream's last
// sequence and its engine has folded it.
func (tc *testCluster) caughtUp(t *testing.T, last uint64) {
	t.Helper()
	for _, c := range tc.crewds {
		n := c.running(t)
		for {
			ch := n.Engine().Changed()
			head, _ := n.local.Head()
			if n.Sequence() >= last && n.Engine().Head() == head {
				break
			}
			select {
			case <-ch:
			case <-n.Failed():
				n = c.running(t) // restarted: wait for the new node
			case <-time.After(30 * time.Second):
				t.Fatalf("%s did not catch up: sequence %d of %d, engine at %d, log at %d", c.name, n.Sequence(),
					last, n.Engine().Head(), head)
			}
		}
	}
}

// rebuilt copies the stream into a new log and folds it from position 1.
// retryRebuild runs step up to five times, until it succeeds, and fails
// the test with its last error.
func retryRebuild(t *testing.T, what string, step func() error) {
	t.Helper()
	var err error
	for attempt := 1; attempt <= 5; attempt++ {
		if err = step(); err == nil {
			return
		}
		t.Logf("rebuild: %s attempt %d: %v", what, attempt, err)
	}
	require.NoError(t, err)
}

func rebuilt(t *testing.T, urls string) ([]byte, *eventlog.Log) {
	t.Helper()
	nc, err := natslog.Connect(urls, natslog.ConnectOptions{Name: "rebuild"})
	require.NoError(t, err)
	defer nc.Close()
	js, err := jsOf(nc)
	require.NoError(t, err)
	local, err := eventlog.Open(filepath.Join(t.TempDir(), "rebuild"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { local.Close() })
	// Right after a failover or a healed partition the stream may still
	// move its leader: opening it, and a copy that fails, are tried again,
	// as a crewd's are.
	var jl *natslog.Log
	retryRebuild(t, "open", func() (err error) {
		jl, err = natslog.Open(context.Background(), js, local, testLog)
		return err
	})
	retryRebuild(t, "copy", func() error {
		_, err := jl.CatchUp(context.Background())
		return err
	})
	s, _, err := projections.LoadTiered(local, projections.Tiering{Retention: -1, NoSnapshot: true})
	require.NoError(t, err)
	b, err := projections.EncodeSnapshot(s)
	require.NoError(t, err)
	return b, local
}
