package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog/natslog"
)

// Before deciding anything a new writer copies the stream to its last sequence and folds it (docs/cluster.md, "The
// lease only makes two writers rare"): what the old writer committed while the new one took the lease — after the
// new one stopped following — is in the state the new writer decides on. Here the old writer, its renewals held back
// as a paused machine's are, commits a run while the new one promotes; the new writer then decides a command on that
// run as it exists, not as a run it never heard of.
func TestANewWriterDecidesOnWhatTheOldOneCommittedWhileItPromoted(t *testing.T) {
	srv := startNATS(t)
	cfg := natslog.Config{Stream: "CREWLOG", Replicas: 1}
	const ttl = 2 * time.Second
	renewals := newHeldRenewals()
	a := startWriterOn(t, srv, Options{Name: "a", Log: cfg, LeaseTTL: ttl, beforeRenew: renewals.hook})

	promoting, proceed := make(chan struct{}), make(chan struct{})
	b := startOn(t, srv, Options{Name: "b", Log: cfg, LeaseTTL: ttl, beforePromote: func(ctx context.Context) {
		close(promoting)
		select {
		case <-proceed:
		case <-ctx.Done():
		}
	}})
	renewals.hold() // a's lease expires a TTL after its last renewal, and b takes it
	select {
	case <-promoting:
	case <-b.Failed():
		t.Fatalf("b failed: %v", b.Err())
	case <-time.After(20 * time.Second):
		t.Fatal("b did not take the lease")
	}
	require.True(t, a.Writer(), "a has not learnt that it lost the lease")
	require.Nil(t, submitAsAdmin(t, a, &commands.RunCreate{RunID: "R", Team: "t", Goal: "g", Cwd: "/w"}).Rejected,
		"a commits while b promotes: nothing of b's is in the stream yet")
	close(proceed)
	awaitElected(t, b)

	rep := submitAsAdmin(t, b, &commands.RunTransition{RunID: "R", To: "running"})
	require.Nil(t, rep.Rejected, "b decided on a state without the run a committed while b promoted")
}
