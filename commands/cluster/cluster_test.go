package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

func jsOf(nc *nats.Conn) (jetstream.JetStream, error) { return jetstream.New(nc) }

// soak is set by CREWLOG_CLUSTER_SOAK=1: 64 clients, more commands and
// CREWLOG_CLUSTER_FAILOVERS rounds of writer kill + NATS stream-leader kill.
func soak() (clients, perClient, rounds int) {
	if os.Getenv("CREWLOG_CLUSTER_SOAK") == "" {
		return 16, 40, 1
	}
	rounds = 10
	if v, err := fmt.Sscan(os.Getenv("CREWLOG_CLUSTER_FAILOVERS"), &rounds); v != 1 || err != nil {
		rounds = 10
	}
	return 64, 8 * rounds, rounds
}

// acked is what clients were answered: command id → reply.
type acked struct {
	mu      sync.Mutex
	replies map[string]commands.Reply
	n       atomic.Int64
	signal  chan struct{} // receives after every ack (non-blocking)
}

func (a *acked) add(id string, r commands.Reply) {
	a.mu.Lock()
	a.replies[id] = r
	a.mu.Unlock()
	a.n.Add(1)
	select {
	case a.signal <- struct{}{}:
	default:
	}
}

// waitFor blocks until n commands were acknowledged or the clients ended.
func (a *acked) waitFor(n int64, clientsDone <-chan struct{}) {
	a.waitForOr(n, clientsDone, nil)
}

// waitForOr is waitFor that also ends at timeout.
func (a *acked) waitForOr(n int64, clientsDone <-chan struct{}, timeout <-chan time.Time) {
	for a.n.Load() < n {
		select {
		case <-a.signal:
		case <-clientsDone:
			return
		case <-timeout:
			return
		}
	}
}

// Under load from clients that retry with their command ids, the writer
// crewd is killed, then the NATS node leading the stream, then the new
// stream leader is partitioned (its routes cut while it runs): no acknowledged
// command is lost or applied twice, positions stay gapless, every crewd's
// state equals a rebuild from the stream, and verify passes everywhere.
//
// The long version: CREWLOG_CLUSTER_SOAK=1 [CREWLOG_CLUSTER_FAILOVERS=25]
// (each round kills the writer crewd and the stream leader: 2 failovers).
func TestClusterFailoverLosesNothing(t *testing.T) {
	clients, perClient, rounds := soak()
	tc := startTestCluster(t)
	first, _ := tc.writer(t, 30*time.Second)
	t.Logf("first writer: crewd%d", first)

	ack := &acked{replies: map[string]commands.Reply{}, signal: make(chan struct{}, 1)}
	clientsDone := make(chan struct{})
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for ci := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- runClient(tc, ci, perClient, ack)
		}()
	}
	go func() { wg.Wait(); close(clientsDone) }()

	total := int64(clients * perClient)
	var failovers []time.Duration
	for round := range rounds {
		base := total * int64(round) / int64(rounds)
		step := total / int64(rounds)
		ack.waitFor(base+step/5, clientsDone)
		w, _ := tc.writer(t, 30*time.Second)
		killed := time.Now()
		tc.crewds[w].kill()
		nw, at := tc.writer(t, 30*time.Second)
		require.NotEqual(t, w, nw)
		failovers = append(failovers, at.Sub(killed))
		require.NoError(t, tc.crewds[w].start())

		ack.waitFor(base+step/2, clientsDone)
		if leader := tc.nats.StreamLeader(testLog.Stream); leader >= 0 {
			tc.nats.Stop(leader)
			ack.waitFor(base+step*13/20, clientsDone)
			require.NoError(t, tc.nats.Restart(leader))
		}

		// The stream leader again, this time cut off while it runs: its
		// clients stay connected to a node that has lost its quorum.
		ack.waitFor(base+step*15/20, clientsDone)
		if leader := tc.nats.StreamLeader(testLog.Stream); leader >= 0 {
			tc.nats.Partition(leader, true)
			// A partition heals: after a while, or once the majority
			// side has done some work, whichever is first.
			ack.waitForOr(base+step*18/20, clientsDone, time.After(3*time.Second))
			tc.nats.Partition(leader, false)
		}
	}
	<-clientsDone
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	t.Logf("writer failovers (kill → new writer elected): %v", failovers)

	// Everything the clients sent was acknowledged (they retry until it is).
	require.Equal(t, total, ack.n.Load())
	w, _ := tc.writer(t, 30*time.Second)
	js, err := jsOf(tc.crewds[w].running(t).o.Conn)
	require.NoError(t, err)
	// The stream may still be electing a leader after the partition
	// healed (JetStream answers "temporarily unavailable" until it has
	// one): ask again for up to 15 s. NB: an election is not signalled to
	// a client, so it is polled; five tries at once, as before, could all
	// fall inside one election on a loaded machine.
	var info *jetstream.StreamInfo
	for deadline, attempt := time.Now().Add(15*time.Second), 1; ; attempt++ {
		var st jetstream.Stream
		if st, err = js.Stream(context.Background(), testLog.Stream); err == nil {
			info, err = st.Info(context.Background())
		}
		if err == nil || time.Now().After(deadline) {
			break
		}
		t.Logf("stream info, attempt %d: %v", attempt, err)
		time.Sleep(200 * time.Millisecond)
	}
	require.NoError(t, err)
	tc.caughtUp(t, info.State.LastSeq)

	want, rebuiltLog := rebuilt(t, tc.nats.URLs())
	wantHead, wantHash := rebuiltLog.Head()
	// No acknowledged command lost, none applied twice: each acked id
	// wrote exactly one event (a run.created or a mailbox.appended), at
	// the position its answer named.
	written := map[string][]uint64{}
	it := rebuiltLog.Read(1)
	for it.Next() {
		if e := it.Event(); e.CommandID != "" {
			written[e.CommandID] = append(written[e.CommandID], e.Position)
		}
	}
	require.NoError(t, it.Close())
	for id, r := range ack.replies {
		require.Equal(t, []uint64{r.Position}, written[id], "command %s", id)
	}
	require.Len(t, written, int(total), "no command committed that no client sent")

	for _, c := range tc.crewds {
		n := c.running(t)
		head, hash := n.local.Head()
		require.Equal(t, wantHead, head, c.name)
		require.Equal(t, wantHash, hash, "%s: the same hash chain", c.name)
		rep, err := audit.Verify(n.local, nil)
		require.NoError(t, err, c.name)
		require.Empty(t, rep.Check.Problems, c.name)
		var got []byte
		n.Engine().Read(func(s *projections.State) { got, err = projections.EncodeSnapshot(s) })
		require.NoError(t, err)
		require.Equal(t, want, got, "%s: the state equals a rebuild from the stream", c.name)
	}
}

// runClient creates its own run, then sends perClient-1 messages to the
// run's inbox — a command that applied twice would leave two messages —
// each with its command id, to random crewds, retrying each on another
// crewd until it is answered.
func runClient(tc *testCluster, ci, perClient int, ack *acked) error {
	rnd := rand.New(rand.NewPCG(uint64(ci), 7))
	run := fmt.Sprintf("c%02d", ci)
	for k := range perClient {
		id := fmt.Sprintf("c%02d-%04d", ci, k)
		req := commands.Request{Principal: events.AdminPrincipal(), CommandID: id,
			Actor:   events.Actor{Role: events.RoleAdmin},
			Command: &commands.RunCreate{RunID: run, Team: "t", Goal: "g", Cwd: "/w"}}
		if k > 0 {
			req = commands.Request{Principal: events.OrchestratorPrincipal(run), CommandID: id,
				Actor:   events.Actor{Role: events.RoleOrchestrator},
				Command: &commands.MessageSend{RunID: run, To: []string{commands.ToParent}, Body: id}}
		}
		deadline := time.Now().Add(60 * time.Second)
		for {
			n := tc.crewds[rnd.IntN(len(tc.crewds))].current()
			if n == nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			r, err := n.Engine().Submit(ctx, req)
			cancel()
			if err == nil {
				if r.Rejected != nil {
					return fmt.Errorf("%s rejected: %v", id, r.Rejected)
				}
				ack.add(id, r)
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s not answered within a minute: %w", id, err)
			}
			if !errors.Is(err, commands.ErrClosed) && !errors.Is(err, commands.ErrFailed) &&
				!errors.Is(err, ErrNoWriter) && !errors.Is(err, ErrStopped) &&
				!errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("%s: %w", id, err)
			}
		}
	}
	return nil
}
