package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/commands/cluster"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/eventlog/natslog"
)

// benchLeaseTTL is the writer lease's TTL in the benchmark's cluster. A
// lease's TTL is how soon a successor replaces a writer that stopped
// renewing; the benchmark runs one crewd and no successor, so a short TTL
// buys nothing there, and the default (2 s, a renewal given up after 1 s)
// failed cells on a loaded machine: a renewal through the replicated
// key-value stream, queued behind the clients' batches and three servers'
// fsyncs on shared cores, took longer than that, and the only writer
// stopped mid-cell ("this crewd is not the writer"). A minute outlasts any
// cell's window and drain.
const benchLeaseTTL = time.Minute

// openClusterEngineStore is crewlog as the writer of a JetStream cluster
// (commands/cluster): nats-server in this process with sync always and file
// storage — one server for replicas 1, a cluster of that many on loopback
// ports otherwise — reached over TCP on loopback, and one crewd node that
// holds the writer lease. Every group is one atomic batch (its manifest,
// and its events on their runs' subjects) published with the fencing
// expectation and acknowledged by a majority of replicas before it is
// appended to the node's local Pebble copy and answered. The writer decides
// a group while the one before is in flight; early, it also publishes it
// then (cluster.Options.EarlyStaging).
func openClusterEngineStore(dir string, slots, replicas int, early bool) (*engineStore, error) {
	var urls string
	var shutdown func()
	if replicas == 1 {
		srv, err := natslog.StartServer(natslog.ServerOptions{Name: "crewbench", StoreDir: filepath.Join(dir,
			"nats"), Listen: true})
		if err != nil {
			return nil, err
		}
		urls, shutdown = srv.ClientURL(), srv.Shutdown
	} else {
		c, err := natslog.StartDirectCluster(filepath.Join(dir, "nats"), replicas)
		if err != nil {
			return nil, err
		}
		urls, shutdown = c.URLs(), c.Shutdown
	}
	nc, err := natslog.Connect(urls, natslog.ConnectOptions{Name: "crewbench"})
	if err != nil {
		shutdown()
		return nil, err
	}
	l, err := eventlog.Open(filepath.Join(dir, "crewlog"), nil)
	if err != nil {
		nc.Close()
		shutdown()
		return nil, err
	}
	stopAll := func(node *cluster.Node) {
		if node != nil {
			node.Close()
		}
		nc.Close()
		shutdown()
	}
	cfg := benchConfig(slots)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	node, err := cluster.Start(ctx, l, cluster.Options{Name: "crewbench", Conn: nc, LeaseTTL: benchLeaseTTL,
		Log: natslog.Config{Stream: "CREWLOG", Replicas: replicas}, EarlyStaging: early,
		Engine: commands.Options{Config: &cfg}})
	if err != nil {
		stopAll(nil)
		return nil, errors.Join(err, l.Close())
	}
	select {
	case <-node.Elected():
	case <-node.Failed():
		stopAll(node)
		return nil, errors.Join(node.Err(), l.Close())
	case <-ctx.Done():
		stopAll(node)
		return nil, errors.Join(fmt.Errorf("bench: the node did not become the writer: %w", ctx.Err()), l.Close())
	}
	return &engineStore{dir: dir, log: l, eng: node.Engine(), withIDs: true, stop: func() { stopAll(node) }}, nil
}
