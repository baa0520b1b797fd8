package natslog

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Cluster is a JetStream cluster of nats-servers in this process, on
// loopback ports, with file storage under one directory: for tests and
// crewbench. Node i keeps its ports and storage across Stop and Restart.
// In a cluster of StartCluster every route between two nodes runs through
// a proxy of the cluster's, so that Partition can cut a node off while it
// runs; in one of StartDirectCluster the nodes route to each other as
// separate machines would, and cannot be partitioned.
//
// Concurrency: not safe for concurrent use.
type Cluster struct {
	Servers []*server.Server // nil while stopped
	opts    []ServerOptions
	proxies [][]*routeProxy // proxies[i][j]: node i's route to node j; nil in a direct cluster
}

// StartCluster starts n servers under dir, their routes through proxies
// that Partition cuts, and waits until JetStream has a meta leader.
func StartCluster(dir string, n int) (*Cluster, error) {
	return startCluster(dir, n, true)
}

// StartDirectCluster is StartCluster without the route proxies: every
// route message goes from one server to the other, not through a relay of
// this process that reads and writes it again (a benchmark's cluster).
// Partition panics on it.
func StartDirectCluster(dir string, n int) (*Cluster, error) {
	return startCluster(dir, n, false)
}

// clusterStartAttempts bounds the starts of a cluster on fresh ports.
const clusterStartAttempts = 3

// startCluster starts the cluster, again on fresh ports when a server did not start: its ports are reserved and
// released before the servers bind them, so a connection of another process may take one meanwhile (tests of
// several packages run at once).
func startCluster(dir string, n int, proxied bool) (*Cluster, error) {
	var err error
	for range clusterStartAttempts {
		var c *Cluster
		if c, err = startClusterOnce(dir, n, proxied); !errors.Is(err, errNotStarted) {
			return c, err
		}
		for i := range n {
			if rerr := os.RemoveAll(nodeDir(dir, i)); rerr != nil {
				return nil, errors.Join(err, rerr)
			}
		}
	}
	return nil, err
}

func nodeDir(dir string, i int) string { return filepath.Join(dir, fmt.Sprintf("n%d", i)) }

func startClusterOnce(dir string, n int, proxied bool) (*Cluster, error) {
	ports, err := reservePorts(2 * n)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Servers: make([]*server.Server, n), opts: make([]ServerOptions, n)}
	if proxied {
		c.proxies = make([][]*routeProxy, n)
	}
	for i := range n {
		var routes []*url.URL
		for j := range n {
			if i == j {
				continue
			}
			if !proxied {
				routes = append(routes, &url.URL{Scheme: "nats-route", Host: fmt.Sprintf("127.0.0.1:%d", ports[n+j])})
				continue
			}
			if c.proxies[i] == nil {
				c.proxies[i] = make([]*routeProxy, n)
			}
			p, err := startRouteProxy(fmt.Sprintf("127.0.0.1:%d", ports[n+j]))
			if err != nil {
				c.Shutdown()
				return nil, fmt.Errorf("natslog: route proxy: %w", err)
			}
			c.proxies[i][j] = p
			routes = append(routes, &url.URL{Scheme: "nats-route", Host: p.addr()})
		}
		c.opts[i] = ServerOptions{Name: fmt.Sprintf("n%d", i), StoreDir: nodeDir(dir, i),
			Listen: true, Port: ports[i], Cluster: "crewlog", ClusterPort: ports[n+i], Routes: routes, NoAdvertise: true}
	}
	for i := range n {
		if err := c.start(i); err != nil {
			c.Shutdown()
			return nil, err
		}
	}
	if err := c.waitMetaLeader(30 * time.Second); err != nil {
		c.Shutdown()
		return nil, err
	}
	return c, nil
}

// URLs is the comma-separated client URL list of every node.
func (c *Cluster) URLs() string {
	us := make([]string, len(c.opts))
	for i, o := range c.opts {
		us[i] = fmt.Sprintf("nats://127.0.0.1:%d", o.Port)
	}
	return strings.Join(us, ",")
}

// Stop shuts node i down (its storage stays).
func (c *Cluster) Stop(i int) {
	if s := c.Servers[i]; s != nil {
		s.Shutdown()
		s.WaitForShutdown()
		c.Servers[i] = nil
	}
}

// Restart starts node i again on its ports and storage, once they are
// free: while a node is stopped, a connection of this process or another
// may be given one of its ports as its own, and it cannot move to others
// (its peers route to its cluster port). Restart waits up to portWait for
// the ports, and fails naming the one still taken.
func (c *Cluster) Restart(i int) error {
	if err := waitPortsFree(portWait, c.opts[i].Port, c.opts[i].ClusterPort); err != nil {
		return err
	}
	return c.start(i)
}

// start starts node i on its ports and storage. A port taken fails it
// (errNotStarted): a cluster starting starts again on fresh ports.
func (c *Cluster) start(i int) error {
	s, err := StartServer(c.opts[i])
	if err != nil {
		return err
	}
	c.Servers[i] = s
	return nil
}

// portWait is how long Restart waits for a node's ports (a variable for
// tests).
var portWait = 30 * time.Second

// waitPortsFree returns once every port (0: none) can be bound on
// loopback, trying again every 50 ms until wait has passed.
func waitPortsFree(wait time.Duration, ports ...int) error {
	deadline := time.Now().Add(wait)
	for {
		err := portsFree(ports)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// portsFree binds and releases each port, and says which one could not be
// bound.
func portsFree(ports []int) error {
	for _, p := range ports {
		if p == 0 {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			return fmt.Errorf("natslog: port %d of a stopped node is taken: %w", p, err)
		}
		l.Close()
	}
	return nil
}

// StreamLeader is the index of the node leading stream, or -1.
func (c *Cluster) StreamLeader(stream string) int {
	for i, s := range c.Servers {
		if s != nil && s.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
			return i
		}
	}
	return -1
}

// Partition cuts node i's routes to every other node (it keeps running
// and its clients stay connected to it), or with cut false heals them.
func (c *Cluster) Partition(i int, cut bool) {
	if c.proxies == nil {
		panic("natslog: Partition of a cluster without route proxies (StartDirectCluster)")
	}
	for j := range c.proxies {
		if j == i {
			continue
		}
		c.proxies[i][j].setCut(cut)
		c.proxies[j][i].setCut(cut)
	}
}

// Shutdown stops every node.
func (c *Cluster) Shutdown() {
	for i := range c.Servers {
		c.Stop(i)
	}
	for _, ps := range c.proxies {
		for _, p := range ps {
			if p != nil {
				_ = p.close()
			}
		}
	}
}

// waitMetaLeader waits until JetStream has a meta leader that knows every
// node as a peer (a stream of n replicas can be placed). It polls: a server
// offers no signal for either.
func (c *Cluster) waitMetaLeader(d time.Duration) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		for _, s := range c.Servers {
			if s != nil && s.JetStreamIsLeader() && len(s.JetStreamClusterPeers()) >= len(c.Servers) {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.New("natslog: the cluster elected no JetStream meta leader knowing every node")
}

// reservePorts is freePorts (a variable for tests).
var reservePorts = freePorts

// freePorts reserves n loopback ports and releases them for the servers.
func freePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, n)
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("natslog: reserve a port: %w", err)
		}
		ls = append(ls, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}
