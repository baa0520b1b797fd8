package cluster

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog/natslog"
	"github.com/crewlog/crewlog/events"
)

// heldSubmits is a beforeSubmit hook that holds every forwarded request the writer takes until release, counting
// those it holds at once.
type heldSubmits struct {
	released chan struct{}
	release  func()
	now, max atomic.Int64
}

func newHeldSubmits() *heldSubmits {
	h := &heldSubmits{released: make(chan struct{})}
	h.release = sync.OnceFunc(func() { close(h.released) })
	return h
}

func (h *heldSubmits) hold(ctx context.Context) {
	n := h.now.Add(1)
	defer h.now.Add(-1)
	for m := h.max.Load(); n > m && !h.max.CompareAndSwap(m, n); m = h.max.Load() {
	}
	select {
	case <-h.released:
	case <-ctx.Done():
	}
}

// startHeldWriter starts a writer, on a server of its own, whose forwarded requests are held by the returned hook,
// and whose engine's queue holds 8 requests (MaxGroup 2).
func startHeldWriter(t *testing.T) (*server.Server, natslog.Config, *Node, *heldSubmits) {
	t.Helper()
	srv := startNATS(t)
	cfg := natslog.Config{Stream: "CREWLOG", Replicas: 1}
	held := newHeldSubmits()
	t.Cleanup(held.release)
	w := startWriterOn(t, srv, Options{Name: "w", Log: cfg, LeaseTTL: time.Second, beforeSubmit: held.hold,
		Engine: commands.Options{MaxGroup: 2}})
	return srv, cfg, w, held
}

// encodedRunCreate is a forwarded run.create of run id, as a follower sends it.
func encodedRunCreate(t *testing.T, id string) []byte {
	t.Helper()
	b, err := commands.EncodeRequest(commands.Request{Principal: events.AdminPrincipal(), CommandID: id,
		Actor:   events.Actor{Role: events.RoleAdmin},
		Command: &commands.RunCreate{RunID: id, Team: "t", Goal: "g", Cwd: "/w"}})
	require.NoError(t, err)
	return b
}

// A peer (or many followers' clients) publishing requests on the commands subject faster than the writer decides
// them made it start a goroutine for each, holding its bytes for up to ForwardTimeout: goroutines and memory without
// bound. The writer holds at most its engine's queue's worth at once and answers the rest at once, busy, deciding
// nothing; once the held ones are answered it serves requests again.
func TestWriterBoundsTheForwardedRequestsItHolds(t *testing.T) {
	srv, cfg, w, held := startHeldWriter(t)
	slots := w.Engine().QueueCap()
	require.Equal(t, 8, slots, "four groups' worth")

	nc := connectTo(t, srv)
	inbox := nats.NewInbox()
	answers, err := nc.SubscribeSync(inbox)
	require.NoError(t, err)
	goroutines := runtime.NumGoroutine()
	const flood = 300
	for i := range flood {
		m := &nats.Msg{Subject: cfg.CommandSubject(), Reply: inbox, Data: encodedRunCreate(t, fmt.Sprintf("r%d", i))}
		require.NoError(t, nc.PublishMsg(m))
	}
	require.NoError(t, nc.Flush())

	for i := range flood - slots {
		m, err := answers.NextMsg(10 * time.Second)
		require.NoError(t, err, "answer %d of the %d over the bound", i, flood-slots)
		_, err = commands.DecodeReply(m.Data)
		require.ErrorIs(t, err, commands.ErrWriterBusy)
		require.False(t, commands.DecidedNothing(err),
			"no answer of its own for the client: the follower sends it again")
	}
	require.Eventually(t, func() bool { return held.now.Load() == int64(slots) }, 10*time.Second, 10*time.Millisecond,
		"the writer holds its slots' worth")
	require.Equal(t, int64(slots), held.max.Load(), "held at once")
	require.Less(t, runtime.NumGoroutine()-goroutines, slots+50, "goroutines while the writer holds its slots")

	held.release()
	for i := range slots {
		m, err := answers.NextMsg(10 * time.Second)
		require.NoError(t, err, "held answer %d", i)
		rep, err := commands.DecodeReply(m.Data)
		require.NoError(t, err)
		require.Nil(t, rep.Rejected)
	}
	rep, err := nc.Request(cfg.CommandSubject(), encodedRunCreate(t, "later"), 10*time.Second)
	require.NoError(t, err)
	later, err := commands.DecodeReply(rep.Data)
	require.NoError(t, err, "a request after the flood is served")
	require.Nil(t, later.Rejected)
}

// A follower whose request the writer answered busy decided nothing there: it sends it again, a command without a
// command id too, and answers the writer's decision once it has room. It answered such a command in doubt
// (unavailable), as a failure of the writer's.
func TestFollowerSendsAgainWhatTheBusyWriterDidNotTake(t *testing.T) {
	srv, cfg, w, held := startHeldWriter(t)
	f := startOn(t, srv, Options{Name: "f", Log: cfg, LeaseTTL: time.Second})

	nc := connectTo(t, srv)
	for i := range w.Engine().QueueCap() {
		m := &nats.Msg{Subject: cfg.CommandSubject(), Reply: nats.NewInbox(),
			Data: encodedRunCreate(t, fmt.Sprintf("r%d", i))}
		require.NoError(t, nc.PublishMsg(m))
	}
	require.NoError(t, nc.Flush())
	require.Eventually(t, func() bool { return held.now.Load() == int64(w.Engine().QueueCap()) }, 10*time.Second,
		10*time.Millisecond, "the writer's slots are held")

	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, err := f.Engine().Submit(ctx, commands.Request{Principal: events.AdminPrincipal(),
			Actor:   events.Actor{Role: events.RoleAdmin},
			Command: &commands.RunCreate{RunID: "through-f", Team: "t", Goal: "g", Cwd: "/w"}})
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("answered while the writer was busy: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	held.release()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("no answer once the writer had room")
	}
}

// The bytes of the forwarded requests the writer holds are bounded whatever part of the message holds them: a peer
// publishing small requests, each with a header of nearly a NATS message (which the writer holds with the request
// until it answers), made it hold as many of them as its engine's queue takes, thousands of max_payloads, where
// only the request's bytes and its credential counted against maxForwardedBytes.
func TestWriterBoundsTheHeaderBytesOfTheForwardedRequestsItHolds(t *testing.T) {
	srv := startNATS(t)
	cfg := natslog.Config{Stream: "CREWLOG", Replicas: 1}
	held := newHeldSubmits()
	t.Cleanup(held.release)
	// NB: a lease of 10 s: the flood (some 75 MB through the one server) delayed a renewal past a 1 s lease's 750 ms
	// on a loaded machine, and the writer stopped, answering the held requests failed rather than busy.
	w := startWriterOn(t, srv, Options{Name: "w", Log: cfg, LeaseTTL: 10 * time.Second, beforeSubmit: held.hold})
	require.NoError(t, w.o.Conn.Flush()) // its subscription is the server's before the flood
	const junk = 900 << 10
	flood := maxForwardedBytes/junk + 12
	require.Greater(t, w.Engine().QueueCap(), flood, "the slots alone do not bound them")

	nc := connectTo(t, srv)
	inbox := nats.NewInbox()
	answers, err := nc.SubscribeSync(inbox)
	require.NoError(t, err)
	pad := strings.Repeat("x", junk)
	for i := range flood {
		m := &nats.Msg{Subject: cfg.CommandSubject(), Reply: inbox, Data: encodedRunCreate(t, fmt.Sprintf("r%d", i)),
			Header: nats.Header{"Pad": []string{pad}}}
		require.NoError(t, nc.PublishMsg(m))
	}
	require.NoError(t, nc.Flush())

	busy := 0
	for busy < flood-maxForwardedBytes/junk {
		m, err := answers.NextMsg(10 * time.Second)
		require.NoError(t, err, "answer %d of the requests over the bound (%d held)", busy, held.now.Load())
		_, err = commands.DecodeReply(m.Data)
		require.ErrorIs(t, err, commands.ErrWriterBusy)
		busy++
	}
	require.LessOrEqual(t, held.max.Load(), int64(maxForwardedBytes/junk), "held at once")
}

// forwardSlots takes a request while it holds fewer than its slots and their bytes stay within its bound, the bound
// itself included; and one of any size when it holds none, so that no request the servers carry is refused for good
// (maxForwardedBytes).
func TestForwardSlotsBoundRequestsAndBytes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		held  []int // sizes taken before
		size  int
		taken bool
	}{
		{"over the byte bound, none held", nil, 11, true},
		{"over the byte bound, one held", []int{1}, 10, false},
		{"up to the byte bound", []int{5}, 5, true},
		{"one byte over it", []int{5, 5}, 1, false},
		{"within bytes, no slot left", []int{1, 1, 1}, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newForwardSlots(3, 10)
			for _, size := range tc.held {
				require.True(t, s.take(size))
			}
			require.Equal(t, tc.taken, s.take(tc.size))
		})
	}
}
