package natslog

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
)

// startServer starts one in-process server (no port) for the test.
func startServer(t *testing.T) *server.Server {
	t.Helper()
	srv, err := StartServer(ServerOptions{Name: "t", StoreDir: filepath.Join(t.TempDir(), "nats")})
	require.NoError(t, err)
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	return srv
}

func connect(t *testing.T, srv *server.Server) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect("", nats.InProcessServer(srv))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return js
}

func openLocal(t *testing.T) *eventlog.Log {
	t.Helper()
	l, err := eventlog.Open(filepath.Join(t.TempDir(), "db"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

var testConfig = Config{Stream: "CREWLOG", Replicas: 1}

// openLog opens a new local copy of the stream on js, caught up.
func openLog(t *testing.T, js jetstream.JetStream) *Log {
	t.Helper()
	l, err := Open(context.Background(), js, openLocal(t), testConfig)
	require.NoError(t, err)
	_, err = l.CatchUp(context.Background())
	require.NoError(t, err)
	return l
}

// requireCopy checks that copy holds what want holds, up to head: the same
// head and hash, so every record and the hash chain.
func requireCopy(t *testing.T, want, copy *eventlog.Log, head uint64) {
	t.Helper()
	h1, hash1 := want.Head()
	h2, hash2 := copy.Head()
	require.Equal(t, head, h2)
	require.Equal(t, h1, h2)
	require.Equal(t, hash1, hash2)
}
