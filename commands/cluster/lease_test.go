package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/eventlog/natslog"
)

// A node renews the lease from the moment it takes it, not once it is the
// writer: copying the stream, folding it and putting the engine config in
// force may take longer than the TTL on a loaded machine, and a lease that
// expired meanwhile let another node take it and fence the first one.
// The promotion here waits until the lease was written twice after it was
// taken (bounded by 10 TTLs, for a build that does not renew it). NB: a TTL of
// 2 s: a node fails when no renewal is answered within 3/4 of it, and under a
// loaded CI host 375 ms (of a 500 ms TTL) passed once before the first renewal.
func TestLeaseIsRenewedWhileTheNodePromotes(t *testing.T) {
	srv := startNATS(t)
	nc := connectTo(t, srv)
	const ttl = 2 * time.Second
	cfg := natslog.Config{Stream: "CREWLOG", Replicas: 1}
	renewed := make(chan error, 1)
	n := startOn(t, srv, Options{Name: "a", Log: cfg, LeaseTTL: ttl,
		beforePromote: func(context.Context) { renewed <- awaitLeaseWrites(nc, cfg, "a", 3, 10*ttl) }})

	require.NoError(t, <-renewed)
	select {
	case <-n.Elected():
	case <-n.Failed():
	}
	require.NoError(t, n.Err())
	require.True(t, n.Writer())
}

// awaitLeaseWrites waits until the lease key has been written writes times
// naming holder (its creation included; the key holds the holder's name
// and a nonce of its lease's opening, "name/nonce"), or fails after timeout.
func awaitLeaseWrites(nc *nats.Conn, cfg natslog.Config, holder string, writes int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	kv, err := js.KeyValue(ctx, "crewlog_"+cfg.Stream+"_writer")
	if err != nil {
		return err
	}
	w, err := kv.Watch(ctx, "writer", jetstream.IncludeHistory())
	if err != nil {
		return err
	}
	defer func() { _ = w.Stop() }()
	seen := 0
	for {
		select {
		case e := <-w.Updates():
			if e != nil && e.Operation() == jetstream.KeyValuePut &&
				strings.HasPrefix(string(e.Value()), holder+"/") {
				if seen++; seen == writes {
					return nil
				}
			}
		case <-ctx.Done():
			return fmt.Errorf("the lease was written %d times of %d within %s", seen, writes, timeout)
		}
	}
}

// A node that took the lease and then hangs while it promotes (its copy
// of the stream waiting on a consumer that gets nothing) renews the lease
// all the while: before the watchdog, every command in the cluster waited
// for as long as it hung. It gives the promotion up once nothing moved for
// the stall bound, fails, and gives the lease up at once (as it fails, or
// at the latest as it closes), so the other node becomes the writer.
func TestStalledPromotionGivesTheLeaseUp(t *testing.T) {
	srv := startNATS(t)
	cfg := natslog.Config{Stream: "CREWLOG", Replicas: 1}
	// A TTL that outlasts the test's checks: the lease is free at once
	// only if a gives it up.
	const ttl = 4 * time.Second
	a := startOn(t, srv, Options{Name: "a", Log: cfg, LeaseTTL: ttl, promoteStall: time.Second,
		beforePromote: func(ctx context.Context) { <-ctx.Done() }})
	select {
	case <-a.Failed():
	case <-time.After(20 * time.Second):
		t.Fatal("a promotion that hangs is not given up")
	}
	require.ErrorIs(t, a.Err(), ErrPromoteStalled)
	require.False(t, a.Writer())
	require.NoError(t, a.Close())

	js, err := jetstream.New(connectTo(t, srv))
	require.NoError(t, err)
	probe, err := natslog.OpenLease(context.Background(), js, cfg, "probe", ttl)
	require.NoError(t, err)
	holder, err := probe.Holder(context.Background())
	require.NoError(t, err)
	require.Empty(t, holder, "the node that gave its promotion up still holds the lease")

	startWriterOn(t, srv, Options{Name: "b", Log: cfg, LeaseTTL: ttl}) // the other node becomes the writer
}

// The promotion's watchdog times the copy of the stream, which waits on NATS, and not the engine's fold of what was
// copied: that is local work, whose head moves only once it is done, so a long backlog would look like a stall and
// fail over every writer that took the lease behind one (docs/cluster.md: "the engine's fold of what it copied, local
// work, is not timed"). Here the fold takes three stall bounds, and the node becomes the writer all the same.
func TestAPromotionIsNotGivenUpWhileItFolds(t *testing.T) {
	const stall = time.Second
	w := startWriterOn(t, startNATS(t), Options{Name: "w", Log: natslog.Config{Stream: "CREWLOG", Replicas: 1},
		LeaseTTL: 2 * time.Second, promoteStall: stall, duringPromotionFold: func(ctx context.Context) {
			select {
			case <-time.After(3 * stall):
			case <-ctx.Done(): // given up: the promotion fails
			}
		}})
	require.NoError(t, w.Err())
	require.True(t, w.Writer())
}

// startOn starts a node of o on the in-process server srv, with a
// connection and a local log of its own, all closed when the test ends.
func startOn(t *testing.T, srv *server.Server, o Options) *Node {
	t.Helper()
	local, err := eventlog.Open(filepath.Join(t.TempDir(), o.Name), nil)
	require.NoError(t, err)
	t.Cleanup(func() { local.Close() })
	o.Conn = connectTo(t, srv)
	n, err := Start(context.Background(), local, o)
	require.NoError(t, err)
	t.Cleanup(func() { n.Close() })
	return n
}

// startWriterOn starts a node on srv, as startOn does, and waits until it is the writer.
func startWriterOn(t *testing.T, srv *server.Server, o Options) *Node {
	t.Helper()
	w := startOn(t, srv, o)
	awaitElected(t, w)
	return w
}

// awaitElected waits until n is the writer, and fails the test when n fails first or has not become the writer
// within 20 s.
func awaitElected(t *testing.T, n *Node) {
	t.Helper()
	select {
	case <-n.Elected():
	case <-n.Failed():
		t.Fatalf("%s failed: %v", n.o.Name, n.Err())
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not become the writer", n.o.Name)
	}
}

// startWriterWithClient starts a NATS server and a writer named "w" of stream CREWLOG on it (a lease of a second),
// and connects a client of the test to the server.
func startWriterWithClient(t *testing.T) (*Node, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	srv := startNATS(t)
	w := startWriterOn(t, srv, Options{Name: "w", Log: natslog.Config{Stream: "CREWLOG", Replicas: 1},
		LeaseTTL: time.Second})
	nc := connectTo(t, srv)
	js, err := jsOf(nc)
	require.NoError(t, err)
	return w, nc, js
}

// startNATS starts a NATS server with JetStream in the test process,
// shut down when the test ends.
func startNATS(t *testing.T) *server.Server {
	t.Helper()
	srv, err := natslog.StartServer(natslog.ServerOptions{Name: "t", StoreDir: filepath.Join(t.TempDir(), "nats")})
	require.NoError(t, err)
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	return srv
}

// connectTo connects to the in-process server srv until the test ends.
func connectTo(t *testing.T, srv *server.Server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect("", nats.InProcessServer(srv))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc
}

// A writer whose renewals of the lease go unanswered for three quarters of its TTL (a paused machine, a slow server)
// stops, and says why: the lease was not renewed in time, which is neither the lease lost to another holder nor a
// commit error. It failed with the renewal's own context error, which told crewd's operator nothing of the lease.
func TestWriterWhoseRenewalsGoUnansweredFailsSayingSo(t *testing.T) {
	srv := startNATS(t)
	var slow atomic.Bool
	w := startWriterOn(t, srv, Options{Name: "w", Log: natslog.Config{Stream: "CREWLOG", Replicas: 1},
		LeaseTTL: time.Second, beforeRenew: func(ctx context.Context) {
			if slow.Load() {
				select {
				case <-time.After(time.Second):
				case <-ctx.Done():
				}
			}
		}})
	slow.Store(true)
	select {
	case <-w.Failed():
	case <-time.After(10 * time.Second):
		t.Fatal("the writer did not stop")
	}
	require.ErrorIs(t, w.Err(), ErrLeaseNotRenewed)
	require.NotErrorIs(t, w.Err(), natslog.ErrLeaseLost)
}

// The stall bound is five lease TTLs and never under 10 s, the bound of one JetStream API call: a promotion given up
// sooner would fail over a writer for every NATS leader election, one waiting longer would leave the cluster with
// no writer for longer than docs/reliability.md says.
func TestPromotionStallBoundIsFiveTTLsAndAtLeastTenSeconds(t *testing.T) {
	for _, tc := range []struct {
		ttl, stall time.Duration
	}{
		{time.Second, 10 * time.Second},
		{2 * time.Second, 10 * time.Second}, // crewd's default TTL
		{3 * time.Second, 15 * time.Second},
		{10 * time.Second, 50 * time.Second},
	} {
		o := Options{LeaseTTL: tc.ttl}
		require.Equal(t, tc.stall, o.promoteStallFor(), "lease TTL %v", tc.ttl)
	}
}

// A writer whose lease another holder took fails at its next renewal, saying the lease was lost: at once, not after
// renewing in vain for three quarters of its TTL while the other holder may already write, and not as a lease that
// went unrenewed (ErrLeaseNotRenewed), which tells its operator of a slow server, not of another writer.
func TestWriterWhoseLeaseAnotherTookFailsAtItsNextRenewal(t *testing.T) {
	w, _, js := startWriterWithClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	lease, err := js.KeyValue(ctx, "crewlog_"+w.o.Log.Stream+"_writer")
	require.NoError(t, err)
	_, err = lease.Put(ctx, "writer", []byte("another/holder"))
	require.NoError(t, err)
	select {
	case <-w.Failed():
	case <-time.After(10 * time.Second):
		t.Fatal("the writer did not stop")
	}
	require.ErrorIs(t, w.Err(), natslog.ErrLeaseLost)
	require.NotErrorIs(t, w.Err(), ErrLeaseNotRenewed)
}
