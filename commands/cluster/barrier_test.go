package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog/natslog"
	"github.com/crewlog/crewlog/events"
)

// A writer whose lease another node took, and that has not learnt it yet (its renewals held back, as a paused
// machine's are), answers no command it decided without events once the new writer appended: neither its own
// clients nor a forwarded request hear "not found" for what the new writer created. The command is answered as a
// deposed writer's appending group is (the engine's failure: in doubt), and the old writer fails stop.
func TestDeposedWriterAnswersNothingFromAStateBehindTheNewWriters(t *testing.T) {
	admin := events.Actor{Role: events.RoleAdmin}
	for _, tc := range []struct {
		name  string
		write commands.Command // on the new writer
		ask   commands.Command // of the old one, which refuses it without events on its own state
		// via asks the old writer a for r and returns the answer and the error that carries the failure.
		via func(t *testing.T, a *Node, r commands.Request) (commands.Reply, error)
		// failed is what the answer's error is when a is failed stop.
		failed error
	}{
		{"its own client", &commands.RunCreate{RunID: "R2", Team: "t", Goal: "g", Cwd: "/w"},
			&commands.RunTransition{RunID: "R2", To: "running"}, submitTo, commands.ErrFailed},
		{"a forwarded request",
			&commands.TaskCreate{RunID: "R", TaskID: "T2", Role: "executor", Agent: "a", Title: "t", Cwd: "/w"},
			&commands.TaskTransition{RunID: "R", TaskID: "T2", To: "running"}, forwardTo, commands.ErrRemote},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startNATS(t)
			cfg := natslog.Config{Stream: "CREWLOG", Replicas: 1}
			renewals := newHeldRenewals()
			a := startWriterOn(t, srv, Options{Name: "a", Log: cfg, LeaseTTL: time.Second,
				beforeRenew: renewals.hook})
			run := &commands.RunCreate{RunID: "R", Team: "t", Goal: "g", Cwd: "/w"}
			require.Nil(t, submitAsAdmin(t, a, run).Rejected)
			require.Nil(t, submitAsAdmin(t, a, &commands.RunTransition{RunID: "R", To: "running"}).Rejected)

			renewals.hold() // a's lease expires a TTL after its last renewal, and b takes it
			b := startWriterOn(t, srv, Options{Name: "b", Log: cfg, LeaseTTL: time.Second})
			require.Nil(t, submitAsAdmin(t, b, tc.write).Rejected, tc.write.Kind())
			require.True(t, a.Writer(), "a has not learnt that it lost the lease")

			rep, err := tc.via(t, a, commands.Request{Principal: events.AdminPrincipal(), Actor: admin,
				Command: tc.ask})
			require.Nil(t, rep.Rejected, "a answered from a state behind b's")
			require.ErrorIs(t, err, tc.failed)
			require.Contains(t, err.Error(), natslog.ErrFenced.Error())
			requireDeposedFailsStop(t, a)
		})
	}
}

// submitTo submits r to n's engine, as a client of n's socket does.
func submitTo(t *testing.T, n *Node, r commands.Request) (commands.Reply, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return n.Engine().Submit(ctx, r)
}

// forwardTo sends r to n as a follower forwards it to the writer, through n's handler of forwarded requests (on a
// subject of the test's: the commands subject's queue would pick any writer), and decodes its answer.
func forwardTo(t *testing.T, n *Node, r commands.Request) (commands.Reply, error) {
	t.Helper()
	const subject = "test.forward"
	sub, err := n.o.Conn.Subscribe(subject, n.serve)
	require.NoError(t, err)
	defer func() { _ = sub.Unsubscribe() }()
	require.NoError(t, n.o.Conn.Flush())
	data, err := commands.EncodeRequest(r)
	require.NoError(t, err)
	ans, err := n.o.Conn.Request(subject, data, 10*time.Second)
	require.NoError(t, err)
	return commands.DecodeReply(ans.Data)
}

// The barrier costs a group that appends nothing one request of the writer (the stream's info, from its leader),
// however many commands the group holds, and a group that appends none: the fence is its batch's. The writer's
// renewals of its lease are held back, so that its connection carries the groups' messages alone. A burst is sent
// while the group before it is held, so that its commands queue together, as they do behind a group the stream takes
// its time to confirm.
func TestAGroupThatAppendsNothingCostsTheWriterOneRequest(t *testing.T) {
	srv := startNATS(t)
	cfg := natslog.Config{Stream: "CREWLOG", Replicas: 1}
	renewals := newHeldRenewals()
	eventless := newEventlessGroups()
	submitted := &submissions{checked: make(chan struct{}, 64)}
	w := startWriterOn(t, srv, Options{Name: "w", Log: cfg, LeaseTTL: time.Second,
		Engine: commands.Options{Observer: eventless, Space: submitted}, beforeRenew: renewals.hook})
	t.Cleanup(eventless.let) // before the node closes: a test that fails while a group is held does not hang
	renewals.hold()
	sent := func() func() int {
		before := w.o.Conn.Stats().OutMsgs
		return func() int { return int(w.o.Conn.Stats().OutMsgs - before) }
	}
	refused := func(i int) commands.Request {
		return commands.Request{Principal: events.AdminPrincipal(), Actor: events.Actor{Role: events.RoleAdmin},
			Command: &commands.RunTransition{RunID: fmt.Sprintf("missing-%d", i), To: "running"}}
	}

	seq, messages := w.Sequence(), sent()
	require.Nil(t, submitAsAdmin(t, w, &commands.RunCreate{RunID: "R", Team: "t", Goal: "g", Cwd: "/w"}).Rejected)
	require.Equal(t, int(w.Sequence()-seq), messages(), "a group that appends sends its batch's messages alone")

	messages = sent()
	for i := range 3 {
		rep, err := submitTo(t, w, refused(i))
		require.NoError(t, err)
		require.NotNil(t, rep.Rejected)
		require.Equal(t, 1, <-eventless.sizes)
	}
	require.Equal(t, 3, messages(), "three groups of one command that appends nothing")

	// Sent at once (a cluster node's SubmitAll sends one after the other), they share groups: the first command's
	// group is held, and with it the publisher, until the others are submitted, so they queue behind it.
	const burst = 16
	messages = sent()
	errs := make(chan error, burst)
	submit := func(i int) {
		go func() {
			rep, err := submitTo(t, w, refused(i))
			if err == nil && rep.Rejected == nil {
				err = fmt.Errorf("command %d accepted", i)
			}
			errs <- err
		}()
	}
	eventless.hold.Store(true)
	submit(0)
	require.Equal(t, 1, <-eventless.held)
	submitted.on.Store(true)
	for i := 1; i < burst; i++ {
		submit(i)
	}
	for range burst - 1 {
		<-submitted.checked
	}
	submitted.on.Store(false)
	eventless.let()
	for range burst {
		require.NoError(t, <-errs)
	}
	groups := 0
	for answered := 0; answered < burst; groups++ {
		answered += <-eventless.sizes
	}
	requests := messages()
	require.Less(t, groups, burst, "the commands queued behind a group did not share groups")
	require.Equal(t, groups, requests, "one request per group that appends nothing, not per command")
	t.Logf("%d commands that append nothing, sent at once, made %d groups and cost %d requests", burst, groups,
		requests)
}

// eventlessGroups is a commands.Observer that sends the number of commands of each group that appended nothing on
// sizes, once the group is answered. Once hold is set, it holds the next such group there, and with it the publisher
// (no group after it is answered), until let: it sends the group's number of commands on held first.
type eventlessGroups struct {
	sizes   chan int
	hold    atomic.Bool
	held    chan int
	release chan struct{}
	let     func()
}

func newEventlessGroups() *eventlessGroups {
	release := make(chan struct{})
	return &eventlessGroups{sizes: make(chan int, 64), held: make(chan int, 1), release: release,
		let: sync.OnceFunc(func() { close(release) })}
}

func (o *eventlessGroups) Committed(g *commands.GroupReport) {
	if g.Events != 0 {
		return
	}
	if o.hold.CompareAndSwap(true, false) {
		o.held <- len(g.Commands)
		<-o.release
	}
	o.sizes <- len(g.Commands)
}

func (*eventlessGroups) Snapshotted(uint64, int, time.Time) {}

// submissions is a commands.SpaceGuard with room always that, while on, signals on checked each command submitted:
// the engine asks it just before it queues the command, and its queue has room for the test's burst, so a command
// signalled is queued without waiting for anything.
type submissions struct {
	on      atomic.Bool
	checked chan struct{}
}

func (s *submissions) CheckSpace() error {
	if s.on.Load() {
		select {
		case s.checked <- struct{}{}:
		default: // more checks than the test waits for: it waits for none of them
		}
	}
	return nil
}

// heldRenewals is a node's beforeRenew hook that, once hold is called, holds its renewals of the lease back until it
// stops, as a paused machine's are.
type heldRenewals struct {
	on   atomic.Bool
	held chan struct{}
}

func newHeldRenewals() *heldRenewals { return &heldRenewals{held: make(chan struct{}, 1)} }

func (h *heldRenewals) hook(ctx context.Context) {
	if h.on.Load() {
		select {
		case h.held <- struct{}{}:
		default:
		}
		<-ctx.Done()
	}
}

// hold holds the renewals back, and returns once one is held: none is on its way then.
func (h *heldRenewals) hold() {
	h.on.Store(true)
	<-h.held
}

// A request its caller refused (Request.Refused: the broker's measure of a message against its copy) is answered by
// the writer as its engine answers any request, not from its log alone: a writer whose lease another node took, and
// that has not learnt it yet, answered the refusal from its store while the new writer had recorded an outcome under
// the request's id — a retry told otherwise than the first attempt was. It is answered as a deposed writer's group
// that appends nothing is (the engine's failure: in doubt), and the old writer fails stop.
func TestDeposedWriterAnswersNoRefusedRequestFromAStateBehindTheNewWriters(t *testing.T) {
	srv := startNATS(t)
	cfg := natslog.Config{Stream: "CREWLOG", Replicas: 1}
	renewals := newHeldRenewals()
	a := startWriterOn(t, srv, Options{Name: "a", Log: cfg, LeaseTTL: time.Second, beforeRenew: renewals.hook})
	require.Nil(t, submitAsAdmin(t, a, &commands.RunCreate{RunID: "R", Team: "t", Goal: "g", Cwd: "/w"}).Rejected)
	require.Nil(t, submitAsAdmin(t, a, &commands.RunTransition{RunID: "R", To: "running"}).Rejected)
	require.Nil(t, submitAsAdmin(t, a, &commands.TaskCreate{RunID: "R", TaskID: "T", Role: "executor", Agent: "a",
		Title: "t", Cwd: "/w"}).Rejected)

	renewals.hold() // a's lease expires a TTL after its last renewal, and b takes it
	b := startWriterOn(t, srv, Options{Name: "b", Log: cfg, LeaseTTL: time.Second})
	orch := events.OrchestratorPrincipal("R")
	req := commands.Request{Principal: orch, CommandID: "c1", Actor: orch.Actor(),
		Command: &commands.MessageSend{RunID: "R", To: []string{"T"}, Body: "hi"}}
	first, err := submitTo(t, b, req)
	require.NoError(t, err)
	require.Nil(t, first.Rejected, "b recorded the first attempt")
	require.True(t, a.Writer(), "a has not learnt that it lost the lease")

	refusal := errors.New("refused by the caller")
	req.Refused = refusal
	_, err = submitTo(t, a, req)
	require.NotErrorIs(t, err, refusal, "a answered the refusal from a store behind b's, which recorded the id")
	require.ErrorIs(t, err, commands.ErrFailed)
	require.Contains(t, err.Error(), natslog.ErrFenced.Error())
	requireDeposedFailsStop(t, a)
}

// requireDeposedFailsStop requires a, a writer deposed by another node's commit, to fail stop with its engine's
// failure.
func requireDeposedFailsStop(t *testing.T, a *Node) {
	t.Helper()
	select {
	case <-a.Failed():
	case <-time.After(10 * time.Second):
		t.Fatal("a, deposed, did not fail stop")
	}
	require.ErrorIs(t, a.Err(), commands.ErrFailed)
}
