package natslog

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// ServerOptions describe a nats-server started in this process: for tests,
// crewbench and single-machine trials. A production cluster runs its own
// nats-server processes with the same settings (doc.go).
type ServerOptions struct {
	Name     string // server name, unique in a cluster
	StoreDir string // JetStream file storage
	// Listen opens a client port on loopback (a random one when Port is 0);
	// without it clients connect in-process only (nats.InProcessServer).
	Listen bool
	Port   int
	// Cluster joins a cluster of that name through Routes, with a route
	// port on loopback (a random one when ClusterPort is 0).
	Cluster     string
	ClusterPort int
	Routes      []*url.URL
	// NoAdvertise keeps the server from telling others its route address,
	// so that they reach it only through Routes (a test's proxies).
	NoAdvertise bool
	MaxPayload  int32 // 0: the server's default
}

// StartServer starts a JetStream-enabled nats-server with file storage and
// sync_interval always (SyncAlways: every stored message is fsynced before
// it is acknowledged), which crewlog requires: without it an acknowledged
// group can be lost with the machine.
func StartServer(o ServerOptions) (*server.Server, error) {
	so := &server.Options{
		ServerName: o.Name, JetStream: true, StoreDir: o.StoreDir, SyncAlways: true,
		NoLog: true, NoSigs: true, MaxPayload: o.MaxPayload, DontListen: !o.Listen,
		Host: "127.0.0.1", Port: o.Port,
	}
	if o.Listen && o.Port == 0 {
		so.Port = server.RANDOM_PORT
	}
	if o.Cluster != "" {
		so.Cluster = server.ClusterOpts{Name: o.Cluster, Host: "127.0.0.1", Port: o.ClusterPort, NoAdvertise: o.NoAdvertise}
		if o.ClusterPort == 0 {
			so.Cluster.Port = server.RANDOM_PORT
		}
		so.Routes = o.Routes
	}
	srv, err := server.NewServer(so)
	if err != nil {
		return nil, fmt.Errorf("natslog: nats server: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(readyTimeout) {
		srv.Shutdown()
		return nil, fmt.Errorf("%w (client port %d, cluster port %d: taken, or the machine too slow)", errNotStarted,
			so.Port, so.Cluster.Port)
	}
	return srv, nil
}

// errNotStarted is StartServer's error when the server is not ready for connections within readyTimeout: one of its
// ports was taken, or the machine is too slow.
var errNotStarted = errors.New("natslog: nats server did not start")

// readyTimeout is how long StartServer waits for the server to accept connections (a variable for tests).
var readyTimeout = 10 * time.Second
