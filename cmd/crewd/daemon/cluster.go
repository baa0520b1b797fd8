package daemon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/commands/cluster"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/eventlog/natslog"
)

// Stores crewd can run on (--store).
const (
	StorePebble    = "pebble"
	StoreJetStream = "jetstream"
)

// Cluster is how crewd joins a JetStream cluster (--store jetstream; docs/cluster.md).
type Cluster struct {
	URLs     string // comma-separated NATS URLs
	Creds    string // a NATS .creds file, optional
	TLSCA    string // PEM roots to trust, optional
	TLSCert  string // client certificate (PEM), with TLSKey, optional
	TLSKey   string
	Stream   string
	Replicas int
	Name     string        // this crewd's name in the cluster (the lease holder)
	LeaseTTL time.Duration // how long a dead writer keeps the lease
	// MaxBatch is the most messages the writer puts in one atomic batch:
	// the NATS servers' max_batch_size (natslog.Config.MaxBatchMessages).
	MaxBatch int
	// EarlyStaging publishes each group while the one before is
	// replicated (cluster.Options.EarlyStaging).
	EarlyStaging bool
}

var clusterOptions = []option{
	{"store", kindString, "pebble|jetstream", "where the log commits: pebble (this machine's store) or jetstream (a NATS JetStream stream shared by several crewds, one of them writing; the store in --data is this crewd's copy); the flags below apply only with jetstream and are refused without it", fixed(StorePebble)},
	{"nats", kindString, "URL[,URL]", "NATS server URLs (--store jetstream)", fixed("")},
	{"nats-creds", kindString, "FILE", "NATS credentials file (JWT and nkey seed), as NATS users issue them", fixed("")},
	{"nats-tls-ca", kindString, "FILE", "PEM certificates to trust for the NATS servers' TLS (default: the system's)", fixed("")},
	{"nats-tls-cert", kindString, "FILE", "client certificate (PEM) for NATS TLS, with --nats-tls-key", fixed("")},
	{"nats-tls-key", kindString, "FILE", "client key (PEM) for NATS TLS", fixed("")},
	{"stream", kindString, "NAME", "JetStream stream holding the log: 1..64 letters, digits, _ and -", fixed("CREWLOG")},
	{"replicas", kindInt, "N", "the stream's replicas, 1..5 (3 survives one NATS node down)", fixed("3")},
	{"node-name", kindString, "NAME", "this crewd's name among the cluster's crewds (default: host name and process id)", fixed("")},
	{"lease-ttl", kindDuration, "DURATION", "how long the writer lease outlives its holder: a dead writer is replaced after about this long; the same on every crewd of the stream (one whose TTL is not the lease bucket's is refused), 500ms..1m", fixed("2s")},
	{"nats-pipeline", kindBool, "[=BOOL]", "the writer publishes each group as soon as it has decided it, while the one before is replicated (off: once that one is acknowledged); it shortens a command's wait where the NATS servers have machines of their own, and costs CPU per command where they share crewd's cores (docs/cluster.md)", fixed("false")},
	{"nats-max-batch", kindInt, "N", "the most messages of one atomic batch, 2..100000: the NATS servers' jetstream limits max_batch_size (1000 unless configured); a group that needs more is published as several batches cut at command boundaries", fixed(strconv.Itoa(natslog.DefaultMaxBatchMessages))},
}

func init() { options = append(options, clusterOptions...) }

// loadCluster reads the cluster options with Load's helpers; it checks them only for --store jetstream.
func loadCluster(integer func(name string, lo, hi int) int, duration func(name string) time.Duration,
	boolean func(name string) bool, str func(name string) (text, src string),
	fail func(format string, args ...any)) (string, Cluster) {
	store, src := str("store")
	switch store {
	case StorePebble:
		// NB: a cluster setting given on its own is a crewd meant to join a cluster, which started alone would
		// answer from a store no other crewd shares.
		for _, o := range clusterOptions {
			if _, src := str(o.name); o.name != "store" && !strings.HasPrefix(src, "default ") {
				fail("%s: applies only with --store jetstream", src)
			}
		}
		return store, Cluster{}
	case StoreJetStream:
	default:
		fail("%s: %q is not one of pebble, jetstream", src, store)
		return store, Cluster{}
	}
	text := func(name string) string { t, _ := str(name); return t }
	c := Cluster{URLs: text("nats"), Creds: text("nats-creds"), TLSCA: text("nats-tls-ca"),
		TLSCert: text("nats-tls-cert"), TLSKey: text("nats-tls-key"), Stream: text("stream"),
		Replicas: integer("replicas", 1, 5), Name: text("node-name"), LeaseTTL: duration("lease-ttl"),
		MaxBatch: integer("nats-max-batch", 2, 100000), EarlyStaging: boolean("nats-pipeline")}
	if c.URLs == "" {
		fail("--store jetstream needs --nats URL[,URL]")
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		fail("--nats-tls-cert and --nats-tls-key go together")
	}
	if c.LeaseTTL < 500*time.Millisecond || c.LeaseTTL > time.Minute {
		fail("--lease-ttl: %s is outside 500ms..1m", c.LeaseTTL)
	}
	if err := c.LogConfig().Validate(); err != nil {
		fail("%v", err)
	}
	if c.Name == "" {
		host, _ := os.Hostname()
		c.Name = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	return store, c
}

// tlsConfig builds the NATS client's TLS settings (nil when none are given).
func (c Cluster) tlsConfig() (*tls.Config, error) {
	if c.TLSCA == "" && c.TLSCert == "" {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.TLSCA != "" {
		pem, err := os.ReadFile(c.TLSCA)
		if err != nil {
			return nil, fmt.Errorf("daemon: --nats-tls-ca: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("daemon: --nats-tls-ca: no PEM certificate in %s", c.TLSCA)
		}
	}
	if c.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("daemon: --nats-tls-cert/--nats-tls-key: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// Connect connects to the cluster's NATS servers.
func (c Cluster) Connect(name string) (*nats.Conn, error) {
	tc, err := c.tlsConfig()
	if err != nil {
		return nil, err
	}
	return natslog.Connect(c.URLs, natslog.ConnectOptions{Name: name, Creds: c.Creds, TLS: tc})
}

// LogConfig names the stream and bounds its batches.
func (c Cluster) LogConfig() natslog.Config {
	return natslog.Config{Stream: c.Stream, Replicas: c.Replicas, MaxBatchMessages: c.MaxBatch}
}

// clusterEngine is the engine of a crewd in a cluster and how to stop it.
type clusterEngine struct {
	node *cluster.Node
	nc   *nats.Conn
}

// openClusterEngine joins the cluster: it copies the stream into log and starts the node (cluster.Start).
// maxFrame is the broker's frame cap (--max-frame), which the servers' max_payload should be above.
func openClusterEngine(ctx context.Context, cfg Cluster, log *eventlog.Log, opts commands.Options, maxFrame int,
	lg *slog.Logger) (*clusterEngine, error) {
	nc, err := cfg.Connect("crewd " + cfg.Name)
	if err != nil {
		return nil, fmt.Errorf("daemon: %w", err)
	}
	if mp := nc.MaxPayload(); mp > 0 && mp < int64(maxFrame) {
		// NB: a warning, not a refusal: NATS's default max_payload (1 MiB) is --max-frame's default, and a frame
		// near the cap is rare. A command larger than one NATS message is refused when it comes, naming the limit.
		lg.Warn("the NATS servers' max_payload is below --max-frame: a command larger than one NATS message is "+
			"refused; raise max_payload above --max-frame, or lower --max-frame", "max_payload", mp, "max_frame", maxFrame)
	}
	node, err := cluster.Start(ctx, log, cluster.Options{Name: cfg.Name, Conn: nc, Log: cfg.LogConfig(),
		LeaseTTL: cfg.LeaseTTL, EarlyStaging: cfg.EarlyStaging, Engine: opts, Logger: lg.With("component", "cluster")})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("daemon: join the cluster: %w", err)
	}
	return &clusterEngine{node: node, nc: nc}, nil
}

// Close leaves the cluster (a writer gives the lease up).
func (c *clusterEngine) Close() {
	c.node.Close()
	c.nc.Close()
}
