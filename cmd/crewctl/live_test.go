package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
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
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
)

const liveToken = "live-admin-token"

// liveDaemon serves the real broker in-process on a fresh data directory
// (store, admin.token, server.key), as crewd lays it out, and returns the
// data directory and the socket.
func liveDaemon(t *testing.T) (data, socket string) {
	return liveDaemonWith(t, broker.Options{})
}

// liveDaemonWith is liveDaemon with the broker's options opts (its socket,
// admin digest and server key are liveDaemon's).
func liveDaemonWith(t *testing.T, opts broker.Options) (data, socket string) {
	data = t.TempDir()
	l, err := eventlog.Open(filepath.Join(data, storeDir), nil)
	require.NoError(t, err)
	eng, err := commands.Open(l, commands.Options{})
	require.NoError(t, err)
	key := []byte(strings.Repeat("k", 32))
	require.NoError(t, os.WriteFile(filepath.Join(data, adminTokenFile), []byte(liveToken+"\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(data, serverKeyFile), key, 0o600))
	sum := sha256.Sum256([]byte(liveToken))
	// NB: the broker makes run/ 0700 itself, as it makes crewd's socket directory.
	opts.SocketPath = filepath.Join(brokertest.SocketDir(t), "run", "crewd.sock")
	opts.AdminDigest, opts.ServerKey = hex.EncodeToString(sum[:]), key
	srv, err := broker.New(eng, l, opts)
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
	return data, srv.Addr()
}

func createRun(t *testing.T, ctx context.Context, socket string) string {
	c, err := client.Dial(ctx, socket, client.Hello{Role: "admin", Token: liveToken}, nil)
	require.NoError(t, err)
	defer c.Close()
	var run struct {
		RunID string `json:"runId"`
	}
	require.NoError(t, c.Call(ctx, "run.create", map[string]any{"team": "t", "goal": "g", "cwd": "/w"}, &run))
	return run.RunID
}

// TestBackupWhileCrewdRuns: with crewd reachable, backup has it write the
// checkpoint (the store stays locked by the daemon) and verifies the copy.
func TestBackupWhileCrewdRuns(t *testing.T) {
	data, socket := liveDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	createRun(t, ctx, socket)
	dest := filepath.Join(t.TempDir(), "backup")
	r := crewctl(t, dialBroker, "backup", dest, "--data", data, "--socket", socket, "--json")
	require.Equal(t, exitOK, r.code, "%s%s", r.out, r.err)
	var out backupOutput
	require.NoError(t, json.Unmarshal([]byte(r.out), &out))
	require.True(t, out.Online)
	require.True(t, out.ServerKey)
	require.True(t, out.Verify.OK)
	require.Positive(t, out.Head)
	require.LessOrEqual(t, out.Head, out.Verify.Head)

	r = crewctl(t, dialBroker, "backup", dest, "--data", data, "--socket", socket)
	require.Equal(t, exitUsage, r.code, "the backup directory exists")
}

// TestBackupRefusesAnotherServerKey: the daemon reached through --socket keeps
// its server.key in its own data directory; a --data that holds another key,
// or none, would give the backup a key that validates none of the daemon's
// tokens. backup fails and leaves nothing behind, and succeeds once --data is
// the daemon's.
func TestBackupRefusesAnotherServerKey(t *testing.T) {
	data, socket := liveDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	createRun(t, ctx, socket)
	tokenFile := filepath.Join(data, adminTokenFile)

	other := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(other, serverKeyFile), []byte(strings.Repeat("o", 32)), 0o600))
	empty := t.TempDir()
	linked := t.TempDir() // the daemon's key, but through a symbolic link, which backup does not read through
	require.NoError(t, os.Symlink(filepath.Join(data, serverKeyFile), filepath.Join(linked, serverKeyFile)))
	for _, tc := range []struct{ name, dir, says string }{
		{"another key", other, "is not the running crewd's"},
		{"no key", empty, "holds none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dest := filepath.Join(t.TempDir(), "backup")
			r := crewctl(t, dialBroker, "backup", dest, "--data", tc.dir, "--token-file", tokenFile, "--socket", socket)
			require.Equal(t, exitProblem, r.code, "%s%s", r.out, r.err)
			require.Contains(t, r.err, tc.says)
			require.Contains(t, r.err, "--data")
			require.NoDirExists(t, dest, "nothing is left behind")
		})
	}
	t.Run("a key behind a link", func(t *testing.T) {
		dest := filepath.Join(t.TempDir(), "backup")
		r := crewctl(t, dialBroker, "backup", dest, "--data", linked, "--token-file", tokenFile, "--socket", socket)
		require.Equal(t, exitProblem, r.code, "%s%s", r.out, r.err)
		require.Contains(t, r.err, "not a regular file")
		require.NoDirExists(t, dest, "nothing is left behind")
	})

	dest := filepath.Join(t.TempDir(), "backup")
	r := crewctl(t, dialBroker, "backup", dest, "--data", data, "--token-file", tokenFile, "--socket", socket, "--json")
	require.Equal(t, exitOK, r.code, "%s%s", r.out, r.err)
	key, err := os.ReadFile(filepath.Join(dest, serverKeyFile))
	require.NoError(t, err)
	require.Equal(t, strings.Repeat("k", 32), string(key))
}

// lockedBuffer is an output written by the command and read by the test;
// wrote signals each write.
type lockedBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	wrote chan struct{}
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case w.wrote <- struct{}{}:
	default:
	}
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestEventsFollowUsesTheSubscription: events --follow prints the events
// committed after it started, pushed by events.subscribe for the named run.
func TestEventsFollowUsesTheSubscription(t *testing.T) {
	data, socket := liveDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := createRun(t, ctx, socket)

	followCtx, stop := context.WithCancel(ctx)
	out, errb := lockedBuffer{wrote: make(chan struct{}, 1)}, lockedBuffer{}
	code := make(chan int, 1)
	go func() {
		code <- runWith(followCtx, []string{"events", "--run", run, "--follow", "--json", "--data", data, "--socket", socket},
			stdio{out: &out, err: &errb})
	}()
	waitFor := func(typ string) {
		for !strings.Contains(out.String(), `"`+typ+`"`) {
			select {
			case <-ctx.Done():
				t.Fatalf("no %s in %q (stderr %q)", typ, out.String(), errb.String())
			case <-out.wrote:
			}
		}
	}
	waitFor("credential.issued") // the last event of the first page: what follows comes from the subscription
	c := adminOf(t, ctx, socket)
	for _, to := range []string{"planning", "running"} {
		require.NoError(t, c.Call(ctx, "run.transition", map[string]any{"runId": run, "to": to}, nil))
	}
	waitFor("run.running")
	stop()
	require.Equal(t, exitOK, <-code, errb.String())
	var seqs []uint64
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var ev teamEvent
		require.NoError(t, json.Unmarshal([]byte(line), &ev))
		seqs = append(seqs, ev.Metadata.Seq)
	}
	require.Equal(t, []uint64{1, 2, 3, 4}, seqs, "every event once, in order")
}

func runWith(ctx context.Context, args []string, io stdio) int { return run(ctx, args, io, dialBroker) }

// TestDialBrokerRefusesAnotherUsersSocket: the default socket directory may sit in the shared temp directory, where
// another user can create it first and listen at crewd's path. crewctl must not hand that listener the admin token:
// a socket whose listening process runs as another uid is refused before the hello is written.
func TestDialBrokerRefusesAnotherUsersSocket(t *testing.T) {
	path := filepath.Join(brokertest.SocketDir(t), "crewd.sock")
	ln, err := net.Listen("unix", path)
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		b, _ := io.ReadAll(c)
		got <- b
	}()

	// The listener runs as this test's uid; crewctl expecting another one is the same as an impostor of another uid.
	old := crewdUID
	crewdUID = func() int { return os.Geteuid() + 1 }
	t.Cleanup(func() { crewdUID = old })

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := dialBroker(ctx, path, "admin-secret-token")
	if b != nil {
		b.Close()
	}
	require.ErrorContains(t, err, "uid")
	require.NotContains(t, string(<-got), "admin-secret-token", "the admin token reached a listener of another uid")
}

// TestEventsSaysWhatCrewdOmitted: an event too large for crewd's frame comes without its data (metadata.omitted);
// events says so, where it described the event from nothing, as one whose fields were all empty: "task  created
// (, )" for a task whose title did not fit.
func TestEventsSaysWhatCrewdOmitted(t *testing.T) {
	data, socket := liveDaemonWith(t, broker.Options{MaxFrame: 4096})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, a := taskW(t, ctx, socket)
	// NB: a title of 960 chars fits in task.create's frame, and its event, which adds the metadata, does not.
	callOK(t, ctx, a, "task.create", map[string]any{"runId": run, "taskId": "Big", "role": "engineer", "agent": "e",
		"title": strings.Repeat("😀", 960), "cwd": "/w"})
	r := crewctl(t, dialBroker, "events", "--run", run, "--json", "--data", data, "--socket", socket)
	require.Equal(t, exitOK, r.code, r.err)
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	require.Contains(t, lines[len(lines)-1], `"omitted":true`, "crewd left the data out")

	r = crewctl(t, dialBroker, "events", "--run", run, "--data", data, "--socket", socket)
	require.Equal(t, exitOK, r.code, r.err)
	lines = strings.Split(strings.TrimSpace(r.out), "\n")
	last := lines[len(lines)-1]
	require.Contains(t, last, "task.created")
	require.NotContains(t, last, "task  created (, )")
	require.Contains(t, last, "task Big: data omitted")
}

// TestEventsTypeIsTheStoredType: --type matches an imported event by the type the log stored, foreign.imported, as
// events.subscribe's types do (docs/protocol.md), so the events events --follow prints before and after it starts
// are chosen alike. The pages read before matched the source's type (task.progress) shown in its place: with
// --type foreign.imported the history's imported events were left out and the new ones printed, and with --type
// task.progress the other way round.
func TestEventsTypeIsTheStoredType(t *testing.T) {
	data, socket, imported := importedRun(t)
	imported("progress", "foreign.imported", map[string]any{"source": "picrew", "type": "task.progress", "seq": 1,
		"time": "2026-01-01T00:00:00Z", "data": `{"step":1}`})
	for _, tc := range []struct {
		typ  string
		seqs []uint64
	}{{"foreign.imported", []uint64{2}}, {"task.progress", nil}, {"run.created", []uint64{1}}} {
		r := crewctl(t, dialBroker, "events", "--run", "P", "--type", tc.typ, "--json", "--data", data, "--socket", socket)
		require.Equal(t, exitOK, r.code, r.err)
		var seqs []uint64
		for line := range strings.Lines(r.out) {
			var ev teamEvent
			require.NoError(t, json.Unmarshal([]byte(line), &ev))
			seqs = append(seqs, ev.Metadata.Seq)
		}
		require.Equal(t, tc.seqs, seqs, "--type %s", tc.typ)
	}
}

// importedRun serves the real broker (liveDaemon) with one run, P, imported through import.append, and returns with
// its data directory and socket what imports more of P's events, each as a write of its own named id.
func importedRun(t *testing.T) (data, socket string, imported func(id, typ string, payload map[string]any)) {
	data, socket = liveDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	a := adminOf(t, ctx, socket)
	imported = func(id, typ string, payload map[string]any) {
		t.Helper()
		res := callOK(t, ctx, a, "import.append", map[string]any{"source": "picrew", "writes": []any{map[string]any{
			"commandId": "import:P:" + id, "runId": "P", "events": []any{map[string]any{"type": typ, "payload": payload}}}}})
		require.NotContains(t, res["results"].([]any)[0], "error", id)
	}
	imported("run", "run.created", map[string]any{"team": "t", "goal": "g", "cwd": "/w"})
	return data, socket, imported
}

// TestCancelOfADelegationHoldingNoSlot: crewd refuses to cancel, by its subId alone, a delegation that holds no slot
// (settled already, or none such) and says to name its run, which crewctl cancel cannot: crewctl says what it takes,
// where it left the operator with advice no flag of its own follows. The refusal stays a problem (exit 1).
func TestCancelOfADelegationHoldingNoSlot(t *testing.T) {
	data, socket, imported := importedRun(t)
	imported("W", "task.created", map[string]any{"taskId": "W", "role": "engineer", "agent": "e", "title": "w", "cwd": "/w"})
	imported("admitted", "delegate.admitted", map[string]any{"taskId": "W", "subId": "gc-s", "childDepth": 2,
		"role": "explorer", "timeoutSec": 100, "cwd": "/w", "title": "s", "prompt": "p"})
	imported("settled", "delegate.completed", map[string]any{"taskId": "W", "subId": "gc-s", "ok": true})
	for _, args := range [][]string{{"cancel", "gc-s"}, {"cancel", "gc-s", "--free"}, {"cancel", "gc-none"}} {
		r := crewctl(t, dialBroker, append(args, "--data", data, "--socket", socket)...)
		require.Equal(t, exitProblem, r.code, "%v: %s", args, r.err)
		require.Contains(t, r.err, "holds a slot; name its runId", args)
		require.Contains(t, r.err, "crewctl cancel takes a delegation that holds a slot", args)
	}
}
