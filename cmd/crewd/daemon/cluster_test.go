package daemon

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/brokertest"
	"github.com/crewlog/crewlog/broker/client"
	"github.com/crewlog/crewlog/eventlog/natslog"
)

func TestLoadJetStream(t *testing.T) {
	c, err := Load([]string{"--store", "jetstream", "--nats", "nats://a:4222,nats://b:4222", "--stream", "CREW-1",
		"--replicas", "3", "--node-name", "n1", "--nats-creds", "/etc/crew.creds"}, homeEnv)
	require.NoError(t, err)
	require.Equal(t, StoreJetStream, c.Store)
	require.Equal(t, Cluster{URLs: "nats://a:4222,nats://b:4222", Creds: "/etc/crew.creds", Stream: "CREW-1", Replicas: 3,
		Name: "n1", LeaseTTL: 2 * time.Second, MaxBatch: natslog.DefaultMaxBatchMessages}, c.Cluster)
	c, err = Load([]string{"--store", "jetstream", "--nats", "nats://a", "--nats-max-batch", "100", "--nats-pipeline"}, homeEnv)
	require.NoError(t, err)
	require.True(t, c.Cluster.EarlyStaging)
	require.Equal(t, 100, c.Cluster.LogConfig().MaxBatchMessages, "the stream's batches follow the servers' max_batch_size")

	for _, tc := range []struct {
		args []string
		want string
	}{
		// A cluster setting without --store jetstream would leave crewd on its own store, the stream unwritten.
		{[]string{"--nats", "nats://a"}, "--nats: applies only with --store jetstream"},
		{[]string{"--store", "pebble", "--replicas", "9"}, "--replicas: applies only with --store jetstream"},
		{[]string{"--nats-pipeline"}, "--nats-pipeline: applies only with --store jetstream"},
		{[]string{"--config", writeFile(t, "c.json", `{"nats": "nats://a", "lease-ttl": "5s"}`)}, "lease-ttl in "},
		{[]string{"--store", "jetstream"}, "--store jetstream needs --nats"},
		{[]string{"--store", "raft"}, `--store: "raft" is not one of pebble, jetstream`},
		{[]string{"--store", "jetstream", "--nats", "nats://a", "--replicas", "7"}, "--replicas: 7 is outside 1..5"},
		{[]string{"--store", "jetstream", "--nats", "nats://a", "--stream", "a.b"}, `stream name "a.b"`},
		{[]string{"--store", "jetstream", "--nats", "nats://a", "--nats-tls-cert", "c.pem"}, "--nats-tls-cert and --nats-tls-key go together"},
		{[]string{"--store", "jetstream", "--nats", "nats://a", "--lease-ttl", "100ms"}, "--lease-ttl: 100ms is outside 500ms..1m"},
		{[]string{"--store", "jetstream", "--nats", "nats://a", "--nats-max-batch", "1"}, "--nats-max-batch: 1 is outside 2..100000"},
	} {
		_, err := Load(tc.args, homeEnv)
		require.ErrorContains(t, err, tc.want, "%v", tc.args)
	}
}

// runningCrewd is a crewd started by Run in this process.
// runningCrewd is a crewd started by startCrewd: its data directory and socket. It stops when the test ends.
type runningCrewd struct {
	data, socket string
}

func startCrewd(t *testing.T, args ...string) *runningCrewd {
	t.Helper()
	c := &runningCrewd{data: filepath.Join(t.TempDir(), "data"), socket: filepath.Join(brokertest.SocketDir(t), "s", "crewd.sock")}
	cfg, err := Load(append([]string{"--data", c.data, "--socket", c.socket, "--http", "", "--min-free-mib", "0"}, args...), homeEnv)
	require.NoError(t, err)
	startRun(t, cfg)
	return c
}

func (c *runningCrewd) dial(t *testing.T) *client.Client {
	t.Helper()
	cl := dialAdmin(context.Background(), t, c.data, c.socket, nil)
	t.Cleanup(func() { cl.Close() })
	return cl
}

// Two crewds on one stream: a command sent to either is decided once, by
// the writer, and both answer queries about it.
func TestCrewdsShareOneJetStreamLog(t *testing.T) {
	srv, err := natslog.StartServer(natslog.ServerOptions{Name: "t", StoreDir: t.TempDir(), Listen: true})
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	// NB: the default lease TTL, not the shortest: nothing here restarts a
	// crewd, and a writer on a loaded machine that cannot renew a 500ms
	// lease in time stops (its clients get "internal") and is replaced.
	args := []string{"--store", "jetstream", "--nats", srv.ClientURL(), "--replicas", "1"}
	a := startCrewd(t, append(args, "--node-name", "a")...)
	b := startCrewd(t, append(args, "--node-name", "b")...)
	ctx := context.Background()

	ids := []string{"R1", "R2", "R3", "R4", "R5"}
	for i, c := range []*runningCrewd{a, b, a, b, a} {
		cl := c.dial(t)
		var res map[string]any
		require.NoError(t, cl.Call(ctx, "run.create", map[string]any{"runId": ids[i], "team": "t", "goal": "g", "cwd": "/w",
			"commandId": "cmd-" + ids[i]}, &res))
		require.Equal(t, ids[i], res["runId"])
	}
	// A crewd answers a command once its own copy holds it, so it reads
	// its own writes and everything committed before them: a holds R1..R5,
	// b at least R1..R4, whichever of them is the writer.
	for c, want := range map[*runningCrewd][]string{a: ids, b: ids[:4]} {
		var runs struct {
			Runs []struct {
				RunID string `json:"runId"`
			} `json:"runs"`
		}
		require.NoError(t, c.dial(t).Call(ctx, "query.runs", map[string]any{}, &runs))
		var got []string
		for _, r := range runs.Runs {
			got = append(got, r.RunID)
		}
		require.Subset(t, got, want)
	}
}

// A crewd whose NATS servers take messages smaller than its frame cap says so at start: a command legal under
// --max-frame but larger than one NATS message is refused when it comes (naming max_payload), and the operator should
// learn of the mismatch from the start, not from a client's refusal.
func TestCrewdWarnsOfAMaxPayloadBelowItsFrameCap(t *testing.T) {
	for _, tc := range []struct {
		name       string
		maxPayload int32
		warns      bool
	}{
		{"below the frame cap", 64 << 10, true},
		{"above it", 2 << 20, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := natslog.StartServer(natslog.ServerOptions{Name: "t", StoreDir: t.TempDir(), Listen: true,
				MaxPayload: tc.maxPayload})
			require.NoError(t, err)
			t.Cleanup(srv.Shutdown)
			logs, out, cancel, done := runClusteredCrewd(t, srv.ClientURL(), "--max-frame", "1048576")
			require.Eventually(t, func() bool { return strings.Contains(out.String(), "crewd: socket ") }, 30*time.Second,
				10*time.Millisecond, "crewd did not serve: %s", logs.String())
			cancel()
			require.NoError(t, <-done)
			if !tc.warns {
				require.NotContains(t, logs.String(), "max_payload")
				return
			}
			require.Contains(t, logs.String(), "max_payload=65536")
			require.Contains(t, logs.String(), "max_frame=1048576")
		})
	}
}

// lockedBuffer is a bytes.Buffer that crewd's goroutines write to while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestStreamHelpStatesTheNameBound: --help says which stream names crewd takes, the bound Load enforces included (a
// name of 65 characters is refused as bad flags), where it named the characters and not the length.
func TestStreamHelpStatesTheNameBound(t *testing.T) {
	jetstream := []string{"--store", "jetstream", "--nats", "nats://a"}
	_, err := Load(append(jetstream, "--stream", strings.Repeat("S", 64)), homeEnv)
	require.NoError(t, err)
	_, err = Load(append(jetstream, "--stream", strings.Repeat("S", 65)), homeEnv)
	require.ErrorContains(t, err, "1..64")

	var b bytes.Buffer
	Usage(&b, homeEnv)
	_, after, ok := strings.Cut(b.String(), "\n  --stream ")
	require.True(t, ok, "--help documents --stream")
	usage, _, _ := strings.Cut(strings.SplitN(after, "\n", 2)[1], "\n")
	require.Contains(t, usage, "1..64", "--stream's help: %q", usage)
}
