package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog/natslog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// lowSpace is a commands.SpaceGuard that reports too little free space.
type lowSpace struct{}

var errLowSpace = errors.New("test: 1 MiB free, below the minimum")

func (lowSpace) CheckSpace() error { return errLowSpace }

// A writer whose disk is short of space refuses a command before deciding
// it (commands.ErrNoSpace); a follower that forwarded it answers the same
// at once — the disk-full a single crewd gives — instead of sending it
// again until its time is up and answering that no writer answered.
func TestFollowerAnswersTheWritersLowSpace(t *testing.T) {
	srv := startNATS(t)
	cfg := natslog.Config{Stream: "CREWLOG", Replicas: 1}
	startWriterOn(t, srv, Options{Name: "w", Log: cfg, LeaseTTL: time.Second,
		Engine: commands.Options{Space: lowSpace{}}})
	f := startOn(t, srv, Options{Name: "f", Log: cfg, LeaseTTL: time.Second})

	for _, id := range []string{"with-id", ""} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := f.Engine().Submit(ctx, commands.Request{Principal: events.AdminPrincipal(), CommandID: id,
			Actor:   events.Actor{Role: events.RoleAdmin},
			Command: &commands.RunCreate{RunID: "r", Team: "t", Goal: "g", Cwd: "/w"}})
		cancel()
		require.ErrorIs(t, err, commands.ErrNoSpace, "command id %q", id)
		require.NotErrorIs(t, err, ErrNoWriter)
	}
	require.Zero(t, f.Engine().Head(), "nothing was decided")
}

// A follower whose own disk is short of space answers its clients' commands
// disk-full before sending anything, as a single crewd does below its
// minimum: it forwarded them, the writer (with room) decided them, and the
// client of a crewd whose disk was short had its command recorded.
func TestFollowerWithLowSpaceAnswersDiskFull(t *testing.T) {
	srv := startNATS(t)
	cfg := natslog.Config{Stream: "CREWLOG", Replicas: 1}
	w := startWriterOn(t, srv, Options{Name: "w", Log: cfg, LeaseTTL: time.Second})
	f := startOn(t, srv, Options{Name: "f", Log: cfg, LeaseTTL: time.Second,
		Engine: commands.Options{Space: lowSpace{}}})

	head := w.Engine().Head()
	for _, id := range []string{"with-id", ""} {
		_, err := submitRunCreate(f, id)
		require.ErrorIs(t, err, commands.ErrNoSpace, "command id %q", id)
		require.ErrorIs(t, err, errLowSpace, "command id %q: the follower's own reading", id)
		require.NotErrorIs(t, err, ErrNoWriter)
	}
	require.Equal(t, head, w.Engine().Head(), "nothing was decided")
}

// A follower that sent a command whose outcome it did not learn (no
// answer, or the writer's failure) and sends it again does not answer the
// writer's low-space refusal of the retry as disk-full: the writer checks
// its space before it looks the command id up, so the command may have
// been decided by the first attempt. It answers ErrNoWriter, in doubt.
func TestFollowerInDoubtDoesNotAnswerDiskFull(t *testing.T) {
	f, asked := followerOfAFakeWriter(t, func(n int32) error {
		if n == 1 {
			return commands.ErrFailed
		}
		return fmt.Errorf("%w: %w", commands.ErrNoSpace, errLowSpace)
	})
	_, err := submitRunCreate(f, "c-1")
	require.ErrorIs(t, err, ErrNoWriter)
	require.NotErrorIs(t, err, commands.ErrNoSpace)
	require.GreaterOrEqual(t, asked.Load(), int32(2), "sent again after the failure")
}

// A writer whose engine failed because a later group met a lost lease
// answers every group in flight with that failure, whose text names the
// lost lease — but an earlier group may be durable on the stream. A
// follower must not take such an answer for the writer's own "not the
// writer, nothing decided" and send a command without a command id again
// (deciding it twice): it answers in doubt. Only the writer's refusal
// before deciding is sent again.
func TestFollowerResendsOnlyWhatTheWriterDidNotDecide(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer error
		resent bool
	}{
		{"failed after a lost lease", fmt.Errorf("%w: %v", commands.ErrFailed, ErrNotWriter), false},
		{"not the writer", ErrNotWriter, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, asked := followerOfAFakeWriter(t, func(int32) error { return tc.answer })
			_, err := submitRunCreate(f, "")
			require.ErrorIs(t, err, ErrNoWriter)
			require.ErrorIs(t, err, commands.ErrUnavailable, "the broker answers it unavailable")
			if tc.resent {
				require.GreaterOrEqual(t, asked.Load(), int32(2), "nothing was decided: sent again")
			} else {
				require.Equal(t, int32(1), asked.Load(), "in doubt without a command id: not sent again")
			}
		})
	}
}

// While there is no writer (the last one died, the next one is promoting) a forwarded request reaches no one: nothing
// was decided, so the follower waits and sends it again — a command without a command id too — and its client hears
// the answer of the writer that comes, not unavailable (docs/cluster.md, "Forwarding, not redirecting").
func TestFollowerSendsAgainARequestNoWriterReceived(t *testing.T) {
	for _, id := range []string{"with-id", ""} {
		t.Run(fmt.Sprintf("command id %q", id), func(t *testing.T) {
			unreceived := make(chan struct{}, 1)
			f, serve := followerOfAFakeWriterNotServing(t, startNATS(t), Options{unreceived: func() {
				select {
				case unreceived <- struct{}{}:
				default:
				}
			}})
			type answer struct {
				rep commands.Reply
				err error
			}
			answered := make(chan answer, 1)
			go func() {
				rep, err := submitRunCreate(f, id)
				answered <- answer{rep, err}
			}()
			select {
			case <-unreceived:
			case a := <-answered:
				t.Fatalf("answered before any writer served: %v", a.err)
			}
			b, err := commands.EncodeReply(commands.Reply{Result: []byte(`{"runId":"r"}`)}, nil)
			require.NoError(t, err)
			var asked atomic.Int32
			serve(func(*nats.Msg) []byte {
				asked.Add(1)
				return b
			})
			a := <-answered
			require.NoError(t, a.err, "the writer that came answered it")
			require.JSONEq(t, `{"runId":"r"}`, string(a.rep.Result))
			require.Equal(t, int32(1), asked.Load(), "decided once")
		})
	}
}

// A writer may take longer than a few seconds to answer: a publish waits out a stream leader election, up to its
// publish timeout (10 s by default), rather than fail the writer. A follower waits for its answer to a command
// without a command id for as long as the request may wait: such a request cannot be sent again once it may have
// reached a writer, so giving the attempt up gains nothing. It used to give each attempt up after 5 s and answer that
// no writer answered (unavailable, in doubt), while the writer decided the command and its answer was on its way.
func TestFollowerWaitsForASlowWritersAnswerToACommandWithoutAnID(t *testing.T) {
	var asked atomic.Int32
	// NB: an attempt of a request with a command id would be given up at once: any answer comes after it.
	f := followerOfAFakeWriterReplyingWith(t, startNATS(t), Options{attemptTimeout: time.Nanosecond},
		func(*nats.Msg) []byte {
			asked.Add(1)
			return acceptedReply(0)
		})
	rep, err := submitRunCreateWithin(f, "", 30*time.Second)
	require.NoError(t, err)
	require.JSONEq(t, `{"ok":true}`, string(rep.Result))
	require.Equal(t, int32(1), asked.Load())
}

// ForwardTimeout bounds a forwarded request only when its caller set no deadline: a caller's own deadline, longer,
// is the request's (docs/cluster.md: "one without waits as long as the request may (its deadline, else
// ForwardTimeout, 15 s)"). Here the writer answers a command without a command id after five ForwardTimeouts, well
// within its caller's deadline, and the caller hears that answer, not that no writer answered.
func TestFollowerWaitsForAnAnswerUntilItsCallersDeadlineNotForwardTimeout(t *testing.T) {
	const forwardTimeout = 200 * time.Millisecond
	f := followerOfAFakeWriterReplyingWith(t, startNATS(t), Options{ForwardTimeout: forwardTimeout},
		func(*nats.Msg) []byte {
			time.Sleep(5 * forwardTimeout) // NB: the writer's answer comes after ForwardTimeout, whatever the load
			return acceptedReply(0)
		})
	rep, err := submitRunCreateWithin(f, "", 30*time.Second)
	require.NoError(t, err, "given up at ForwardTimeout, before the caller's deadline")
	require.JSONEq(t, `{"ok":true}`, string(rep.Result))
}

// A writer of the build before sends no Crewlog-Decided-On header, and its answer waits for the command's events
// alone (docs/cluster.md, "Forwarding, not redirecting"): the follower answers once its copy holds the position the
// answer names, so that its client reads its own write there. Here the answer names a position the follower's copy
// never holds, and the follower waits for it until its caller gives up.
func TestFollowerAnswersAWriterWithoutDecidedOnOnceItsCopyHoldsTheEvents(t *testing.T) {
	const position = 5
	waitsFor := make(chan uint64, 1)
	f := followerOfAFakeWriterReplyingWith(t, startNATS(t), Options{beforeCopyWait: func(pos uint64) { waitsFor <- pos }},
		func(*nats.Msg) []byte {
			return acceptedReply(position)
		})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	answered := make(chan error, 1)
	go func() {
		_, err := f.Engine().Submit(ctx, commands.Request{Principal: events.AdminPrincipal(),
			Actor:   events.Actor{Role: events.RoleAdmin},
			Command: &commands.RunCreate{RunID: "r", Team: "t", Goal: "g", Cwd: "/w"}})
		answered <- err
	}()
	select {
	case pos := <-waitsFor:
		require.Equal(t, uint64(position), pos)
	case err := <-answered:
		t.Fatalf("answered before its copy held the command's events: %v", err)
	}
	cancel()
	require.ErrorIs(t, <-answered, ErrNoWriter, "the events were not copied here")
}

// acceptedReply is a writer's answer accepting a command at position ({"ok":true}), encoded; nil, no answer, if it does
// not encode.
func acceptedReply(position uint64) []byte {
	b, err := commands.EncodeReply(commands.Reply{Position: position, Result: []byte(`{"ok":true}`)}, nil)
	if err != nil {
		return nil
	}
	return b
}

// followerOfAFakeWriter starts a follower whose writer is the test's: it
// holds the lease and answers the n-th request on the commands subject
// (counted in asked, from 1) with answer(n).
func followerOfAFakeWriter(t *testing.T, answer func(n int32) error) (f *Node, asked *atomic.Int32) {
	return followerOfAFakeWriterOn(t, startNATS(t), answer)
}

// followerOfAFakeWriterOn is followerOfAFakeWriter on the server srv.
func followerOfAFakeWriterOn(t *testing.T, srv *server.Server, answer func(n int32) error) (f *Node,
	asked *atomic.Int32) {
	asked = new(atomic.Int32)
	f = followerOfAFakeWriterReplying(t, srv, func(*nats.Msg) []byte {
		b, err := commands.EncodeReply(commands.Reply{}, answer(asked.Add(1)))
		if err != nil {
			return nil
		}
		return b
	})
	return f, asked
}

// followerOfAFakeWriterReplying starts a follower whose writer is the test's: it holds the lease and answers each
// request on the commands subject with reply(request), or not at all when that is nil.
func followerOfAFakeWriterReplying(t *testing.T, srv *server.Server, reply func(request *nats.Msg) []byte) *Node {
	return followerOfAFakeWriterReplyingWith(t, srv, Options{}, reply)
}

// followerOfAFakeWriterReplyingWith is followerOfAFakeWriterReplying with the follower's options o (its name, log and
// lease TTL set here).
func followerOfAFakeWriterReplyingWith(t *testing.T, srv *server.Server, o Options,
	reply func(request *nats.Msg) []byte) *Node {
	f, serve := followerOfAFakeWriterNotServing(t, srv, o)
	serve(reply)
	return f
}

// followerOfAFakeWriterNotServing starts a follower whose writer is the test's: it holds the lease, and answers the
// requests on the commands subject with reply(request) once serve(reply) was called — until then nothing receives
// them, as while a new writer is promoting.
func followerOfAFakeWriterNotServing(t *testing.T, srv *server.Server, o Options) (f *Node,
	serve func(reply func(request *nats.Msg) []byte)) {
	cfg := natslog.Config{Stream: "CREWLOG", Replicas: 1}
	nc := connectTo(t, srv)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	_, err = natslog.EnsureStream(context.Background(), js, cfg)
	require.NoError(t, err)
	lease, err := natslog.OpenLease(context.Background(), js, cfg, "test-writer", time.Minute)
	require.NoError(t, err)
	ok, err := lease.Acquire(context.Background())
	require.NoError(t, err)
	require.True(t, ok)
	serve = func(reply func(request *nats.Msg) []byte) {
		_, err := nc.QueueSubscribe(cfg.CommandSubject(), "writer", func(m *nats.Msg) {
			if b := reply(m); b != nil {
				_ = m.Respond(b)
			}
		})
		require.NoError(t, err)
		require.NoError(t, nc.Flush()) // NB: the server holds the subscription before any request is sent
	}
	o.Name, o.Log, o.LeaseTTL = "f", cfg, time.Minute
	return startOn(t, srv, o), serve
}

// submitRunCreate submits a run.create through f's engine, bounded by 2 s.
func submitRunCreate(f *Node, commandID string) (commands.Reply, error) {
	return submitRunCreateWithin(f, commandID, 2*time.Second)
}

// submitRunCreateWithin submits a run.create through f's engine, bounded by d.
func submitRunCreateWithin(f *Node, commandID string, d time.Duration) (commands.Reply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return f.Engine().Submit(ctx, commands.Request{Principal: events.AdminPrincipal(), CommandID: commandID,
		Actor:   events.Actor{Role: events.RoleAdmin},
		Command: &commands.RunCreate{RunID: "r", Team: "t", Goal: "g", Cwd: "/w"}})
}

// A writer refuses some commands before deciding them, recording nothing: one whose result the follower's client
// could not carry (commands.ErrResultTooLarge), and one on a cold run it cannot read back from its log
// (projections.ErrNotReadBack). The follower answers the same at once (the broker's oversize-frame, replay-failed, as
// from one crewd), instead of sending it again until its time is up and answering that no writer answered
// (unavailable), which a client retries for ever. A not-read-back refusal was taken for the writer's failure so.
func TestFollowerAnswersTheWritersRefusalsBeforeDeciding(t *testing.T) {
	for _, tc := range []struct {
		name    string
		refusal error
	}{
		{"result too large", fmt.Errorf("%w: run.create answers 90 bytes, 1 fit", commands.ErrResultTooLarge)},
		{"cold run not read back", fmt.Errorf("%w: run r: pebble: corrupt table", projections.ErrNotReadBack)},
	} {
		for _, id := range []string{"with-id", ""} {
			t.Run(fmt.Sprintf("%s, command id %q", tc.name, id), func(t *testing.T) {
				f, asked := followerOfAFakeWriter(t, func(int32) error { return tc.refusal })
				_, err := submitRunCreate(f, id)
				require.ErrorIs(t, err, errors.Unwrap(tc.refusal))
				require.NotErrorIs(t, err, commands.ErrUnavailable)
				require.Equal(t, int32(1), asked.Load(), "nothing was recorded: not sent again")
			})
		}
	}
}

// A follower that sent a command whose outcome it did not learn does not answer the writer's not-read-back refusal
// of a retry as replay-failed: the writer checks the credential, whose run it may fail to read back, before it looks
// the command id up, so the first attempt may have been decided. It answers ErrNoWriter, in doubt.
func TestFollowerInDoubtDoesNotAnswerNotReadBack(t *testing.T) {
	f, asked := followerOfAFakeWriter(t, func(n int32) error {
		if n == 1 {
			return commands.ErrFailed
		}
		return fmt.Errorf("commands: the credential of run r cannot be checked: %w", projections.ErrNotReadBack)
	})
	_, err := submitRunCreate(f, "c-1")
	require.ErrorIs(t, err, ErrNoWriter)
	require.NotErrorIs(t, err, projections.ErrNotReadBack)
	require.GreaterOrEqual(t, asked.Load(), int32(2), "sent again after the failure")
}

// A command forwarded by a follower whose copy lags the writer, and refused by the writer for state the copy does
// not yet hold (a task that ended), is answered only once the copy holds that state: a client that heard the task
// has ended then reads it ended on the crewd it talks to. The follower used to wait only for the position the command
// wrote, none for a refusal, and answered at once from a copy that still showed the task running.
func TestFollowerAnswersARefusalOnceItsCopyHoldsWhatTheWriterDecidedOn(t *testing.T) {
	srv := startNATS(t)
	cfg := natslog.Config{Stream: "CREWLOG", Replicas: 1}
	w := startWriterOn(t, srv, Options{Name: "w", Log: cfg, LeaseTTL: time.Second})
	f, hold, release, waiting := startFollowerHoldingItsFold(t, srv, cfg)
	for _, c := range []commands.Command{
		&commands.RunCreate{RunID: "R", Team: "t", Goal: "g", Cwd: "/w"},
		&commands.RunTransition{RunID: "R", To: "running"},
		&commands.TaskCreate{RunID: "R", TaskID: "T", Role: "executor", Agent: "a", Title: "t", Cwd: "/w"},
		&commands.TaskTransition{RunID: "R", TaskID: "T", To: "running"},
	} {
		require.Nil(t, submitAsAdmin(t, w, c).Rejected, c.Kind())
	}
	waitHead(t, f, w.Engine().Head())
	hold.Store(true)

	require.Nil(t, submitAsAdmin(t, w, &commands.TaskTransition{RunID: "R", TaskID: "T", To: "completed"}).Rejected)
	// While the copy is held before the task's end, the writer's refusal is not answered: the call waits for it.
	answered := submitHeldBack(t, f, waiting, commands.Request{Principal: events.AdminPrincipal(),
		Actor:   events.Actor{Role: events.RoleAdmin},
		Command: &commands.TaskTransition{RunID: "R", TaskID: "T", To: "running"}})
	release()
	a := <-answered
	require.NoError(t, a.err)
	rep := a.rep
	require.NotNil(t, rep.Rejected, "the writer refuses to run a completed task")
	var status projections.TaskStatus
	f.Engine().Read(func(s *projections.State) {
		task, ok := s.Task("R", "T")
		require.True(t, ok)
		status = task.Status
	})
	require.Equal(t, projections.TaskStatus("completed"), status,
		"the follower answered %q from a copy that does not hold what the writer decided on", rep.Rejected.Message)
}
