package natslog

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// The lease bucket has one TTL, and every holder's timing rests on it: a holder renews every quarter of its own
// TTL and believes it holds the lease for three quarters of it. A node opening the lease with another TTL (a crewd
// started with another --lease-ttl, or a typo) used to set the bucket's TTL to its own, so the last node to open
// it set every holder's: a shorter one let a follower take the lease between two renewals of a writer that still
// wrote. It is refused, naming both TTLs, and the bucket keeps its TTL.
func TestLeaseOfAnotherTTLIsRefused(t *testing.T) {
	js := connect(t, startServer(t))
	ctx := context.Background()
	a, err := OpenLease(ctx, js, testConfig, "a", time.Minute)
	require.NoError(t, err)
	requireAcquire(t, a, true)

	_, err = OpenLease(ctx, js, testConfig, "b", 200*time.Millisecond)
	require.ErrorIs(t, err, ErrLeaseTTL)
	require.ErrorContains(t, err, "1m0s")
	require.ErrorContains(t, err, "200ms")
	require.Equal(t, time.Minute, leaseBucketStatus(t, js).TTL(), "the bucket keeps the TTL its holders renew on")

	b, err := OpenLease(ctx, js, testConfig, "b", time.Minute)
	require.NoError(t, err, "the bucket's own TTL is opened")
	requireAcquire(t, b, false)
}

// Opening the lease never changes its bucket: a node given fewer replicas than the bucket was created with (a crewd
// started with another --replicas) used to scale every node's writer lease down to its count, so that the loss of
// one NATS node, which the cluster was set up to survive, could leave the lease unreadable and every writer
// failing. The bucket keeps its replicas, as the stream keeps its own (EnsureStream binds an existing one).
func TestLeaseOfOtherReplicasKeepsTheBuckets(t *testing.T) {
	c, err := StartCluster(filepath.Join(t.TempDir(), "nats"), 3)
	require.NoError(t, err)
	t.Cleanup(c.Shutdown)
	js := jetStreamOf(t, c.URLs())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = OpenLease(ctx, js, Config{Stream: "CREWLOG", Replicas: 3}, "a", time.Minute)
	require.NoError(t, err)

	_, err = OpenLease(ctx, js, Config{Stream: "CREWLOG", Replicas: 1}, "b", time.Minute)
	require.NoError(t, err)
	require.Equal(t, 3, leaseBucketStatus(t, js).Config().Replicas)
}

// leaseBucketStatus is the status of testConfig's lease bucket.
func leaseBucketStatus(t *testing.T, js jetstream.JetStream) *jetstream.KeyValueBucketStatus {
	t.Helper()
	kv, err := js.KeyValue(context.Background(), testConfig.leaseBucket())
	require.NoError(t, err)
	st, err := kv.Status(context.Background())
	require.NoError(t, err)
	return st.(*jetstream.KeyValueBucketStatus)
}
