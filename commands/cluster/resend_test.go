package cluster

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog/natslog"
	"github.com/crewlog/crewlog/events"
)

// A follower sends a command with a command id again when an attempt goes unanswered, however slow the writer is
// to answer the first: the writer decides it once (a retry of a command in flight follows it), and the client gets
// one answer, the accepted command's.
func TestAResendToASlowWriterIsDecidedOnce(t *testing.T) {
	srv := startNATS(t)
	cfg := natslog.Config{Stream: "CREWLOG", Replicas: 1}
	held := newHeldGroups()
	w := startWriterOn(t, srv, Options{Name: "w", Log: cfg, LeaseTTL: time.Second,
		Engine: commands.Options{Observer: held}})
	t.Cleanup(held.let) // before the node closes: a test that fails while a group is held does not hang
	f := startOn(t, srv, Options{Name: "f", Log: cfg, LeaseTTL: time.Second, attemptTimeout: 500 * time.Millisecond})

	sent := make(chan struct{}, 64)
	nc := connectTo(t, srv)
	_, err := nc.Subscribe(cfg.CommandSubject(), func(*nats.Msg) { sent <- struct{}{} })
	require.NoError(t, err)
	require.NoError(t, nc.Flush())

	// The group before the command's is held once answered, and with it the publisher: the command is decided and
	// committed next, and its answer waits.
	held.hold.Store(true)
	before := make(chan error, 1)
	go func() {
		_, err := submitTo(t, w, commands.Request{Principal: events.AdminPrincipal(),
			Actor:   events.Actor{Role: events.RoleAdmin},
			Command: &commands.RunCreate{RunID: "before", Team: "t", Goal: "g", Cwd: "/w"}})
		before <- err
	}()
	<-held.held
	require.NoError(t, <-before)
	type answer struct {
		rep commands.Reply
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		rep, err := submitTo(t, f, commands.Request{Principal: events.AdminPrincipal(), CommandID: "c1",
			Actor:   events.Actor{Role: events.RoleAdmin},
			Command: &commands.RunCreate{RunID: "R", Team: "t", Goal: "g", Cwd: "/w"}})
		answered <- answer{rep, err}
	}()
	for range 2 { // the first attempt and one more
		select {
		case <-sent:
		case <-time.After(5 * time.Second):
			t.Fatal("the follower did not send the command again")
		}
	}
	held.let()
	a := <-answered
	require.NoError(t, a.err)
	require.Nil(t, a.rep.Rejected, "decided again, and refused as a run that exists")
	require.True(t, a.rep.Replayed, "answered to the attempt sent again, as the first attempt")

	it := w.local.ReadStream("R", 1)
	defer it.Close()
	created := 0
	for it.Next() {
		if it.Event().Type == events.TypeRunCreated {
			created++
		}
	}
	require.NoError(t, it.Err())
	require.Equal(t, 1, created, "the run was created once")
}

// A follower sends a command with a command id again a bounded number of times when its attempts go unanswered,
// however long its caller's deadline: each attempt may still be queued on a slow writer, which decides it (once) and
// holds a goroutine and its request's bytes meanwhile. It sent one every attempt bound until the deadline.
func TestAFollowerResendsAnUnansweredCommandABoundedNumberOfTimes(t *testing.T) {
	var asked atomic.Int32
	f := followerOfAFakeWriterReplyingWith(t, startNATS(t), Options{attemptTimeout: 10 * time.Millisecond},
		func(*nats.Msg) []byte {
			asked.Add(1)
			return nil // never answers
		})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := f.Engine().Submit(ctx, commands.Request{Principal: events.AdminPrincipal(), CommandID: "c1",
		Actor:   events.Actor{Role: events.RoleAdmin},
		Command: &commands.RunCreate{RunID: "R", Team: "t", Goal: "g", Cwd: "/w"}})
	require.ErrorIs(t, err, ErrNoWriter)
	require.ErrorIs(t, err, commands.ErrUnavailable, "retry with the same command id")
	require.NoError(t, ctx.Err(), "answered before the caller's deadline")
	require.LessOrEqual(t, asked.Load(), int32(maxUnansweredAttempts))
}

// heldGroups is a commands.Observer that, once hold is set, holds the next group that appended events once it is
// answered, and with it the publisher (no group after it is answered), until let; it signals held first.
type heldGroups struct {
	hold    atomic.Bool
	held    chan struct{}
	release chan struct{}
	let     func()
}

func newHeldGroups() *heldGroups {
	release := make(chan struct{})
	return &heldGroups{held: make(chan struct{}, 1), release: release, let: sync.OnceFunc(func() { close(release) })}
}

func (h *heldGroups) Committed(g *commands.GroupReport) {
	if g.Events > 0 && h.hold.CompareAndSwap(true, false) {
		h.held <- struct{}{}
		<-h.release
	}
}

func (*heldGroups) Snapshotted(uint64, int, time.Time) {}

// A command with a command id goes unanswered three times, no fewer, before the follower answers that no writer
// answered (docs/cluster.md, "Forwarding, not redirecting"), and its attempts that reached no writer — no node
// served the commands subject, as while a new writer promotes — do not count: they waited for the writer that comes,
// and a writer that comes slow to answer still has its three attempts.
func TestAFollowerSendsAnUnansweredCommandThreeTimesNotCountingThoseNoWriterReceived(t *testing.T) {
	const notReceived = 3
	unreceived := make(chan struct{}, notReceived)
	f, serve := followerOfAFakeWriterNotServing(t, startNATS(t), Options{attemptTimeout: 10 * time.Millisecond,
		unreceived: func() {
			select {
			case unreceived <- struct{}{}:
			default:
			}
		}})
	answered := make(chan error, 1)
	go func() {
		_, err := submitRunCreateWithin(f, "c1", 10*time.Second)
		answered <- err
	}()
	for range notReceived {
		select {
		case <-unreceived:
		case err := <-answered:
			t.Fatalf("answered before any writer served: %v", err)
		}
	}
	var asked atomic.Int32
	serve(func(*nats.Msg) []byte {
		asked.Add(1)
		return nil // never answers
	})
	err := <-answered
	require.ErrorIs(t, err, ErrNoWriter)
	require.Equal(t, int32(3), asked.Load(), "attempts unanswered by the writer that came")
}
