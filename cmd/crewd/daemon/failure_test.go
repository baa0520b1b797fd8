package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/brokertest"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/commands/cluster"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/eventlog/natslog"
)

// A crewd of a cluster whose writer lease another took logs that it lost the lease, not that its engine stopped
// after a commit error, which sent the operator to the disk of a crewd that had committed nothing amiss.
func TestCrewdThatLostItsLeaseSaysSo(t *testing.T) {
	srv, err := natslog.StartServer(natslog.ServerOptions{Name: "t", StoreDir: t.TempDir(), Listen: true})
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	logs, _, _, done := runClusteredCrewd(t, srv.ClientURL(), "--stream", "LOST")
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "this crewd is the writer") },
		30*time.Second, 10*time.Millisecond, "no writer: %s", logs.String())

	takeWriterLease(t, srv.ClientURL(), "LOST")

	select {
	case err := <-done:
		require.Error(t, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("crewd did not exit: %s", logs.String())
	}
	require.Contains(t, logs.String(), "this crewd lost the writer lease; answering reads, then exiting")
	require.NotContains(t, logs.String(), "commit error")
}

// While a crewd of a cluster that lost its writer lease answers reads before it exits, its /readyz says it is not
// ready and why, as the line it logs does, where it answered ready (its engine had not failed) until the address
// went.
func TestReadinessOfACrewdThatLostItsLeaseSaysSo(t *testing.T) {
	srv, err := natslog.StartServer(natslog.ServerOptions{Name: "t", StoreDir: t.TempDir(), Listen: true})
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	logs, out, _, done := runClusteredCrewd(t, srv.ClientURL(), "--stream", "UNREADY", "--http", "127.0.0.1:0")
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "this crewd is the writer") },
		30*time.Second, 10*time.Millisecond, "no writer: %s", logs.String())
	var base string
	require.Eventually(t, func() bool {
		for _, line := range strings.Split(out.String(), "\n") {
			if u, ok := strings.CutPrefix(line, "crewd: dashboard "); ok {
				base, _, _ = strings.Cut(u, "/login")
			}
		}
		return base != ""
	}, 30*time.Second, 10*time.Millisecond, "no dashboard: %s", out.String())
	readyz := func() (int, string) {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	code, body := readyz()
	require.Equal(t, http.StatusOK, code, body)

	takeWriterLease(t, srv.ClientURL(), "UNREADY")

	// NB: polled from the lease's loss on: crewd serves for failDrain once it failed, then its address goes.
	for code == http.StatusOK {
		select {
		case err := <-done:
			require.FailNow(t, "crewd exited answering ready", "%v: %s", err, logs.String())
		case <-time.After(10 * time.Millisecond):
		}
		code, body = readyz()
	}
	require.Equal(t, http.StatusServiceUnavailable, code, body)
	require.Equal(t, "not ready: this crewd lost the writer lease; answering reads, then exiting so a supervisor "+
		"restarts crewd\n", body)
}

// takeWriterLease writes another crewd's name in the writer lease of the stream's cluster at url, as a crewd that
// took it would.
func takeWriterLease(t *testing.T, url, stream string) {
	t.Helper()
	ctx := context.Background()
	nc, err := nats.Connect(url)
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	kv, err := js.KeyValue(ctx, "crewlog_"+stream+"_writer")
	require.NoError(t, err)
	_, err = kv.Put(ctx, "writer", []byte("another crewd"))
	require.NoError(t, err)
}

// runClusteredCrewd runs crewd in this process as a node of the cluster of the NATS server at url (one replica), with
// args besides, until stop or the test's end: what it logs, what it prints, and Run's answer once it returns.
func runClusteredCrewd(t *testing.T, url string, args ...string) (logs, out *lockedBuffer, stop context.CancelFunc,
	done <-chan error) {
	t.Helper()
	data := filepath.Join(t.TempDir(), "data")
	socket := filepath.Join(brokertest.SocketDir(t), "s", "crewd.sock")
	cfg, err := Load(append([]string{"--data", data, "--socket", socket, "--http", "", "--min-free-mib", "0",
		"--store", "jetstream", "--nats", url, "--replicas", "1"}, args...), homeEnv)
	require.NoError(t, err)
	logs, out = &lockedBuffer{}, &lockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	ran, returned := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(returned)
		ran <- Run(ctx, cfg, out, slog.New(slog.NewTextHandler(logs, nil)))
	}()
	t.Cleanup(func() {
		cancel()
		<-returned
	})
	return logs, out, cancel, ran
}

// The line crewd logs as it stops names why, for each failure it can see: its engine's (and the commit error that
// stopped it), or its cluster node's.
func TestFailureLineNamesTheCause(t *testing.T) {
	engineFailed := func(cause error) (error, error) { return fmt.Errorf("%w: %v", commands.ErrFailed, cause), cause }
	nodeFailed := func(err error) (error, error) { return err, nil }
	for _, tc := range []struct {
		name       string
		err, cause error
		want       string
	}{
		{"a commit error", nil, fmt.Errorf("%w (cause: %v)", eventlog.ErrFailed, io.ErrUnexpectedEOF),
			"the engine stopped after a commit error"},
		{"a fenced commit", nil, fmt.Errorf("%w: sequence 9 holds batch \"b\"", natslog.ErrFenced),
			"another writer appended to the stream (its commit was fenced)"},
		{"a group after the lease was lost", nil, cluster.ErrNotWriter, "this crewd lost the writer lease"},
		{"the lease lost", fmt.Errorf("%w: key revision mismatch", natslog.ErrLeaseLost), nil,
			"this crewd lost the writer lease"},
		{"the lease not renewed", fmt.Errorf("%w: no renewal answered within 1.5s of the last: %w", cluster.ErrLeaseNotRenewed,
			context.DeadlineExceeded), nil, "could not renew the writer lease in time"},
		{"a promotion stalled", fmt.Errorf("%w (%v)", cluster.ErrPromoteStalled, context.Canceled), nil,
			"its promotion made no progress"},
		{"a copy diverged", fmt.Errorf("%w: sequence 5 follows 3", natslog.ErrDiverged), nil,
			"copy of the stream does not follow the stream (diverged)"},
		{"another failure of the node", errors.New("nats: connection closed"), nil, "this crewd's cluster node stopped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err, cause := nodeFailed(tc.err)
			if tc.err == nil {
				err, cause = engineFailed(tc.cause)
			}
			line := failureLine(err, cause)
			require.Contains(t, line, tc.want)
			require.True(t, strings.HasSuffix(line, "; answering reads, then exiting so a supervisor restarts crewd"), line)
			if tc.want != "the engine stopped after a commit error" {
				require.NotContains(t, line, "commit error")
			}
		})
	}
}
