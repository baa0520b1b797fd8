package natslog

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
)

// groupOfMessages is a group of n-1 writes, each on its own crewlog stream:
// a batch of n messages (its manifest and a chunk per stream).
func groupOfMessages(id string, n int) []eventlog.Write {
	ws := make([]eventlog.Write, n-1)
	for i := range ws {
		ws[i] = eventlog.Write{Principal: "admin", CommandID: fmt.Sprintf("%s-%d", id, i), Result: []byte("{}"),
			Events: []eventlog.Event{{Stream: fmt.Sprintf("r%d", i), Type: "run.created", Time: 1, Payload: []byte{0x80}}}}
	}
	return ws
}

// A copy of a stream replicated on three nodes, through a client connected
// to any one of them, copies it whole. The copy's consumer is placed on a
// replica of JetStream's choosing, often not the client's server, and the
// reply to its creation can reach the client before the server learns the
// consumer's interest in pull requests: a pull sent then is answered "no
// responders". A copy that made a consumer for every 256 messages (an
// ordered consumer's Fetch) met that race about once in 40 consumers and
// failed: each copy here has 20,000 messages to read (78 such consumers), and
// a copy of a long run's stream never finished.
func TestCopyThroughEveryNodeOfACluster(t *testing.T) {
	c, err := StartCluster(filepath.Join(t.TempDir(), "nats"), 3)
	require.NoError(t, err)
	t.Cleanup(c.Shutdown)
	cfg := Config{Stream: "CREWLOG", Replicas: 3}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	w, err := Open(ctx, jetStreamOf(t, c.URLs()), openLocal(t), cfg)
	require.NoError(t, err)
	const groups, messages = 20, DefaultMaxBatchMessages
	for i := range groups {
		_, err := w.Commit(groupOfMessages(fmt.Sprint(i), messages))
		require.NoError(t, err)
	}
	require.Equal(t, uint64(groups*messages), w.Sequence())
	head, _ := w.Local().Head()

	for i, url := range strings.Split(c.URLs(), ",") {
		l, err := Open(ctx, jetStreamOf(t, url), openLocal(t), Config{Stream: cfg.Stream, Existing: true})
		require.NoError(t, err)
		n, err := l.CatchUp(ctx)
		require.NoError(t, err, "a copy through node %d", i)
		require.Equal(t, groups, n)
		requireCopy(t, w.Local(), l.Local(), head)
	}
}

// jetStreamOf connects to urls for the test.
func jetStreamOf(t *testing.T, urls string) jetstream.JetStream {
	t.Helper()
	nc, err := Connect(urls, ConnectOptions{Name: t.Name()})
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return js
}
