package client_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker"
	"github.com/crewlog/crewlog/broker/brokertest"
	"github.com/crewlog/crewlog/broker/client"
	"github.com/crewlog/crewlog/broker/wire"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
)

const adminToken = "test-admin-token"

// realBroker runs the real broker in-process on a fresh store, with the smallest outbound queue so a slow
// subscriber overflows it quickly.
func realBroker(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	l, err := eventlog.Open(filepath.Join(dir, "store"), nil)
	require.NoError(t, err)
	eng, err := commands.Open(l, commands.Options{})
	require.NoError(t, err)
	sum := sha256.Sum256([]byte(adminToken))
	// NB: the broker makes run/ itself, 0700.
	srv, err := broker.New(eng, l, broker.Options{
		SocketPath: filepath.Join(brokertest.SocketDir(t), "run", "b.sock"), AdminDigest: hex.EncodeToString(sum[:]),
		ServerKey: []byte(strings.Repeat("k", 32)), OutboundQueueCap: broker.MinOutboundQueueCap,
	})
	require.NoError(t, err)
	require.NoError(t, srv.Listen())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background()) }()
	t.Cleanup(func() {
		srv.Close()
		require.NoError(t, <-served)
		eng.Close()
		l.Close()
	})
	return srv.Addr()
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestRealBrokerHelloAndCalls(t *testing.T) {
	sock := realBroker(t)
	ctx := ctxFor(t)

	_, err := client.Dial(ctx, sock, client.Hello{Role: "admin", Token: "wrong"}, nil)
	require.Equal(t, wire.CodeAuth, wire.CodeOf(err), "%v", err)

	admin, err := client.Dial(ctx, sock, client.Hello{Role: "admin", Token: adminToken}, nil)
	require.NoError(t, err)
	defer admin.Close()
	var run struct {
		RunID             string `json:"runId"`
		OrchestratorToken string `json:"orchestratorToken"`
	}
	require.NoError(t, admin.Call(ctx, "run.create", map[string]any{"team": "t", "goal": "g", "cwd": "/w"}, &run))

	orch, err := client.Dial(ctx, sock, client.Hello{RunID: run.RunID, TaskID: "orchestrator", Token: run.OrchestratorToken}, nil)
	require.NoError(t, err)
	defer orch.Close()
	require.Equal(t, run.RunID, orch.Ack().Run)

	// Concurrent calls on one connection, each matched to its own answer.
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("T%02d", i)
			var res struct {
				TaskID string `json:"taskId"`
			}
			err := orch.Call(ctx, "task.create", map[string]any{"taskId": id, "role": "executor", "agent": "a", "title": id, "cwd": "/w"}, &res)
			if err == nil && res.TaskID != id {
				err = fmt.Errorf("asked for %s, answered %s", id, res.TaskID)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	err = orch.Call(ctx, "task.create", map[string]any{"taskId": "T00", "role": "executor", "agent": "a", "title": "x", "cwd": "/w"}, nil)
	require.Equal(t, wire.CodeBadParams, wire.CodeOf(err), "%v", err)
	require.Equal(t, wire.CodeNotImplemented, wire.CodeOf(orch.Call(ctx, "no.such", nil, nil)))
}

// TestRealBrokerSubscriptionSurvivesOverflow: a subscriber that does not read while ~1 MB of events is written
// overflows the broker's queue; the resync is recovered transparently, and the events read are exactly those of
// a subscriber that kept up: no gap, no repeat.
func TestRealBrokerSubscriptionSurvivesOverflow(t *testing.T) {
	sock := realBroker(t)
	ctx := ctxFor(t)
	admin, err := client.Dial(ctx, sock, client.Hello{Role: "admin", Token: adminToken}, nil)
	require.NoError(t, err)
	defer admin.Close()
	var run struct {
		RunID             string `json:"runId"`
		OrchestratorToken string `json:"orchestratorToken"`
	}
	require.NoError(t, admin.Call(ctx, "run.create", map[string]any{"team": "t", "goal": "g", "cwd": "/w"}, &run))
	orch, err := client.Dial(ctx, sock, client.Hello{RunID: run.RunID, TaskID: "orchestrator", Token: run.OrchestratorToken},
		&client.Options{EventBuffer: 1})
	require.NoError(t, err)
	defer orch.Close()

	slow, err := orch.Subscribe(ctx, 0, nil)
	require.NoError(t, err)
	defer slow.Close()

	const tasks = 1000
	title := strings.Repeat("t", 1000)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < tasks; i += 16 {
				if err := orch.Call(ctx, "task.create", map[string]any{
					"taskId": fmt.Sprintf("T%04d", i), "role": "executor", "agent": "a", "title": title, "cwd": "/w",
				}, nil); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	// A subscriber that keeps up (everything is written now): the reference.
	ref, err := orch.Subscribe(ctx, 0, nil)
	require.NoError(t, err)
	defer ref.Close()
	want := readSeqs(ctx, t, ref, tasks+2) // run.created, credential.issued, then the tasks
	got := readSeqs(ctx, t, slow, tasks+2)
	require.Equal(t, want, got)
	require.Positive(t, slow.Resyncs(), "the slow subscriber overflowed the broker's queue")
	t.Logf("slow subscriber recovered from %d resyncs", slow.Resyncs())
}

// readSeqs reads n events and checks they come in increasing order.
func readSeqs(ctx context.Context, t *testing.T, s *client.Subscription, n int) []uint64 {
	t.Helper()
	seqs := make([]uint64, 0, n)
	for len(seqs) < n {
		ev, err := s.Next(ctx)
		require.NoError(t, err)
		if len(seqs) > 0 {
			require.Greater(t, ev.Seq, seqs[len(seqs)-1])
		}
		seqs = append(seqs, ev.Seq)
	}
	return seqs
}

// TestRealBrokerAdminSubscribesToANamedRun: the admin credential is scoped to no run, so its subscription must
// name one (WithRun); without it the broker refuses with bad_params.
func TestRealBrokerAdminSubscribesToANamedRun(t *testing.T) {
	sock := realBroker(t)
	ctx := ctxFor(t)
	admin, err := client.Dial(ctx, sock, client.Hello{Role: "admin", Token: adminToken}, nil)
	require.NoError(t, err)
	defer admin.Close()
	var run struct {
		RunID string `json:"runId"`
	}
	require.NoError(t, admin.Call(ctx, "run.create", map[string]any{"team": "t", "goal": "g", "cwd": "/w"}, &run))

	_, err = admin.Subscribe(ctx, 0, nil)
	require.Equal(t, wire.CodeBadParams, wire.CodeOf(err), "%v", err)

	sub, err := admin.Subscribe(ctx, 0, nil, client.WithRun(run.RunID))
	require.NoError(t, err)
	defer sub.Close()
	ev, err := sub.Next(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, ev.Seq)
	require.Contains(t, string(ev.Data), run.RunID)
}

// The real broker's socket path does not grow with the test's name either: see socketdir_test.go.
func TestRealBrokerSocketPathDoesNotGrowWithTheTestName(t *testing.T) {
	path := realBroker(t)
	require.LessOrEqual(t, len(path), len(os.TempDir())+40, "%s under %s", path, os.TempDir())
}
