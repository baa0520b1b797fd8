package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog/natslog"
	"github.com/crewlog/crewlog/events"
)

// A writer that failed stop (here its commit was fenced: the stream moved past its copy) takes no forwarded request
// from then on, before its owner closes it: a request finds no responder, as while there is no writer, so it reaches
// the next writer alone. The failed writer stayed in the commands subject's queue group until it was closed — crewd
// closes it only after answering reads for a while — answering each request it drew "not the writer", so a
// follower's request went to and fro between it and the new writer.
func TestAFailedWriterTakesNoForwardedRequest(t *testing.T) {
	w, nc, js := startWriterWithClient(t)
	cfg := w.o.Log
	require.Nil(t, submitAsAdmin(t, w, &commands.RunCreate{RunID: "R", Team: "t", Goal: "g", Cwd: "/w"}).Rejected)
	fenceWriter(t, w, js)

	data, err := commands.EncodeRequest(commands.Request{Principal: events.AdminPrincipal(), CommandID: "c1",
		Actor:   events.Actor{Role: events.RoleAdmin},
		Command: &commands.RunCreate{RunID: "T", Team: "t", Goal: "g", Cwd: "/w"}})
	require.NoError(t, err)
	var answered error
	// NB: 20 s is a guard, not a measure: the subscription drains on its own, each poll may wait out its request's
	// second, and a loaded machine may take more than a few polls to drain it.
	require.Eventually(t, func() bool {
		_, answered = nc.Request(cfg.CommandSubject(), data, time.Second)
		return errors.Is(answered, nats.ErrNoResponders)
	}, 20*time.Second, 50*time.Millisecond, "the failed writer still takes forwarded requests (last: %v)", answered)
}

// fenceWriter appends a message of another writer's to w's stream through js, has w commit a group on it, and waits
// until w failed stop: its commit was fenced.
func fenceWriter(t *testing.T, w *Node, js jetstream.JetStream) {
	t.Helper()
	_, err := js.Publish(context.Background(), w.o.Log.Subject(), []byte("another writer's message"))
	require.NoError(t, err)
	_, err = submitTo(t, w, commands.Request{Principal: events.AdminPrincipal(),
		Actor:   events.Actor{Role: events.RoleAdmin},
		Command: &commands.RunCreate{RunID: "S", Team: "t", Goal: "g", Cwd: "/w"}})
	require.ErrorIs(t, err, commands.ErrFailed, "fenced")
	select {
	case <-w.Failed():
	case <-time.After(10 * time.Second):
		t.Fatal("the fenced writer did not fail stop")
	}
}

// A node that failed stop (here its copy met a message that is not crewlog's) sends its own clients' commands to the
// writer no more while its owner answers reads before restarting it: it could not learn their outcome (its copy has
// stopped), so each was decided and answered unavailable, in doubt — one without a command id, sent again by its
// client, decided twice. It answers unavailable at once, having sent nothing.
func TestAFailedNodeForwardsNothing(t *testing.T) {
	srv := startNATS(t)
	f, asked := followerOfAFakeWriterOn(t, srv, func(int32) error { return nil })
	js, err := jsOf(connectTo(t, srv))
	require.NoError(t, err)
	_, err = js.Publish(context.Background(), f.o.Log.Subject(), []byte("not a group of crewlog's"))
	require.NoError(t, err)
	select {
	case <-f.Failed():
	case <-time.After(10 * time.Second):
		t.Fatal("the follower's copy did not fail")
	}
	for _, id := range []string{"with-id", ""} {
		_, err := submitRunCreate(f, id)
		require.ErrorIs(t, err, commands.ErrUnavailable, "command id %q", id)
	}
	require.Zero(t, asked.Load(), "a failed node sent its clients' commands to the writer")
}

// A writer that failed stop (here its commit was fenced) gives the lease up at once, not when its owner closes it:
// crewd closes it only after answering reads for a while, and the lease stayed with the failed writer until then —
// or, for a crewd that could not close it, until the lease expired — with no writer in the cluster meanwhile. The
// TTL outlasts the test's wait: the lease is free in time only if the failed writer gave it up.
func TestAFailedWriterGivesTheLeaseUpAtOnce(t *testing.T) {
	srv := startNATS(t)
	cfg := natslog.Config{Stream: "CREWLOG", Replicas: 1}
	// NB: a node first asks for the lease a quarter TTL after it starts, and renews it every quarter: the lease of a
	// writer that failed expires three quarters of a TTL after the failure at the earliest, past the wait below.
	const ttl = 8 * time.Second
	w := startWriterOn(t, srv, Options{Name: "w", Log: cfg, LeaseTTL: ttl})
	require.Nil(t, submitAsAdmin(t, w, &commands.RunCreate{RunID: "R", Team: "t", Goal: "g", Cwd: "/w"}).Rejected)

	js, err := jsOf(connectTo(t, srv))
	require.NoError(t, err)
	probe, err := natslog.OpenLease(context.Background(), js, cfg, "probe", ttl)
	require.NoError(t, err)
	holder, err := probe.Holder(context.Background())
	require.NoError(t, err)
	require.Equal(t, "w", holder)

	fenceWriter(t, w, js)
	require.Eventually(t, func() bool {
		holder, err := probe.Holder(context.Background())
		return err == nil && holder == ""
	}, ttl/2, 20*time.Millisecond, "the failed writer, not closed, still holds the lease")
	ok, err := probe.Acquire(context.Background())
	require.NoError(t, err)
	require.True(t, ok, "another node cannot take the lease the failed writer gave up")
}

// A request the failed writer's subscription had already taken when it failed is answered "not the writer", as
// stopServing promises: it decided nothing, so its follower sends it again to the next writer — not the engine's
// failure, which the follower takes for a request in doubt (forward.go), and answers a command without a command id
// unavailable though nothing decided it.
func TestAFailedWriterAnswersARequestItHadTakenNotTheWriter(t *testing.T) {
	w, nc, js := startWriterWithClient(t)
	fenceWriter(t, w, js)

	// A request as the commands subscription delivered it before it drained: bound to a subscription, answered to
	// an inbox.
	taken, err := nc.SubscribeSync("delivered.before.the.failure")
	require.NoError(t, err)
	inbox := nats.NewInbox()
	answers, err := nc.SubscribeSync(inbox)
	require.NoError(t, err)
	require.NoError(t, nc.PublishRequest("delivered.before.the.failure", inbox, encodedRunCreate(t, "T")))
	m, err := taken.NextMsg(10 * time.Second)
	require.NoError(t, err)

	w.serve(m)
	answer, err := answers.NextMsg(10 * time.Second)
	require.NoError(t, err)
	_, err = commands.DecodeReply(answer.Data)
	require.ErrorIs(t, err, commands.ErrNotWriter)
}
