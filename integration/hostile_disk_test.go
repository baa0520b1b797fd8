package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/client"
	"github.com/crewlog/crewlog/broker/wire"
)

// The disk-full and fatal-error tests run crewd on a real, small tmpfs that the test fills. A tmpfs fails writes
// with ENOSPC exactly as a full disk does, through every layer (Pebble's WAL, its flushes, the secrets), which a
// fault-injecting file system inside the binary would only imitate. Mounting needs root (CAP_SYS_ADMIN), which CI
// has: it runs these tests as root on the same kind of machine. Without it the tests skip and say so.

// mountTmpfs mounts a tmpfs of sizeMiB at dir (created 0700) and unmounts it when the test ends.
func mountTmpfs(t *testing.T, dir string, sizeMiB int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root; CI runs as root")
	}
	require.NoError(t, os.MkdirAll(dir, 0o700))
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%dm,mode=0700", sizeMiB)); err != nil {
		if errors.Is(err, syscall.EPERM) {
			t.Skipf("cannot mount a tmpfs here (%v)", err)
		}
		require.NoError(t, err, "mount tmpfs")
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
}

// freeOn is the space available on dir's file system.
func freeOn(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	require.NoError(t, syscall.Statfs(dir, &st))
	return int64(st.Bavail) * st.Bsize
}

// fill writes a file that leaves about leave bytes free on dir's file system (0: fill it to the last byte).
func fill(t *testing.T, dir string, leave int64) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	require.NoError(t, err)
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for {
		n := freeOn(t, dir) - leave
		if n <= 0 {
			return p
		}
		if _, err := f.Write(chunk[:min(n, int64(len(chunk)))]); err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC)
			return p
		}
	}
}

// newDaemonOn is newDaemon with the data directory on a tmpfs of sizeMiB (its logs stay on the real disk).
func newDaemonOn(t *testing.T, sizeMiB int, args ...string) *daemon {
	d := newDaemon(t, args...)
	mountTmpfs(t, d.data, sizeMiB)
	t.Cleanup(d.cleanup) // registered after the unmount, so it runs first
	return d
}

// exitCode waits for d to exit by itself and returns its status.
func (d *daemon) exitCode() int {
	d.t.Helper()
	d.wait()
	return d.state.ExitCode()
}

func wireCode(err error) wire.Code {
	var we *wire.Error
	if errors.As(err, &we) {
		return we.Code
	}
	return ""
}

type sent struct {
	MessageID string `json:"messageId"`
}

// TestDiskFullRefusesWritesThenRecovers: below --min-free-mib every write is answered disk-full before Pebble
// fails, reads keep working, and the refused command retried with the same commandId once space is back is
// decided then, exactly once.
func TestDiskFullRefusesWritesThenRecovers(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	d := newDaemonOn(t, 64, "--min-free-mib", "16")
	base := d.data
	d.start()
	c := newCrew(ctx, t, d, "01_w")
	w := d.mustDial(ctx, c.workers["01_w"])
	orch := d.mustDial(ctx, c.orch)

	filler := fill(t, base, 8<<20)
	// The daemon reads the free space at most every 100 ms: send until it has seen the filler. Each send before
	// that is an ordinary, successful write.
	var refusedID string
	for i := 0; refusedID == ""; i++ {
		require.Less(t, i, 10_000, "no write was refused as disk-full")
		id := fmt.Sprintf("probe-%d", i)
		err := w.Call(ctx, "msg.send", map[string]any{"to": "parent", "body": id, "commandId": id}, nil)
		switch code := wireCode(err); {
		case err == nil:
		case code == wire.CodeDiskFull:
			refusedID = id
			require.ErrorContains(t, err, "below the minimum")
		default:
			require.NoError(t, err)
		}
	}
	// Every write method is refused alike; reads and queries answer.
	err := orch.Call(ctx, "task.create", map[string]any{"taskId": "02_w", "role": "executor", "agent": "a", "title": "t", "cwd": "/r"}, nil)
	require.Equal(t, wire.CodeDiskFull, wireCode(err), "%v", err)
	var run map[string]any
	require.NoError(t, orch.Call(ctx, "query.run", map[string]any{}, &run))
	require.Zero(t, mailboxCount(ctx, t, orch, refusedID), "the refused message was not recorded")

	require.NoError(t, os.Remove(filler))
	var first sent
	for i := 0; ; i++ {
		require.Less(t, i, 10_000, "writes were not accepted again after space was freed")
		err := w.Call(ctx, "msg.send", map[string]any{"to": "parent", "body": refusedID, "commandId": refusedID}, &first)
		if wireCode(err) == wire.CodeDiskFull {
			continue // not yet re-read
		}
		require.NoError(t, err)
		break
	}
	var again sent
	require.NoError(t, w.Call(ctx, "msg.send", map[string]any{"to": "parent", "body": refusedID, "commandId": refusedID}, &again))
	require.Equal(t, first.MessageID, again.MessageID, "a retry replays the recorded outcome")
	require.Equal(t, 1, mailboxCount(ctx, t, orch, refusedID), "the command took effect exactly once")
	d.stop()
}

// mailboxCount is how many messages of c's run have body, over every page: on a tmpfs, where a sync costs nothing,
// the probes before the daemon sees the filler can be more than a page of 1,000.
func mailboxCount(ctx context.Context, t *testing.T, c *client.Client, body string) int {
	t.Helper()
	n := 0
	eachPage(ctx, t, c, "query.mailbox", func(raw json.RawMessage) {
		var page struct {
			Messages []struct {
				Body string `json:"body"`
			} `json:"messages"`
		}
		require.NoError(t, json.Unmarshal(raw, &page))
		for _, m := range page.Messages {
			if m.Body == `"`+body+`"` { // bodies are stored as JSON
				n++
			}
		}
	})
	return n
}

// TestEngineFailureExitsNonZero: with the space check off, a write that fails on a full disk stops the engine;
// crewd then exits 1 (for its supervisor to restart it) instead of answering internal forever. Restarted on the
// full disk with the check on, it refuses to start at once, naming the cause, instead of spinning in Pebble.
func TestEngineFailureExitsNonZero(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	d := newDaemonOn(t, 48, "--min-free-mib", "0")
	base := d.data
	d.start()
	c := newCrew(ctx, t, d, "01_w")
	w := d.mustDial(ctx, c.workers["01_w"])
	fill(t, base, 0)

	body := strings.Repeat("x", 200_000)
	var failed error
	for i := 0; failed == nil; i++ {
		require.Less(t, i, 1_000, "no write failed on a full disk")
		err := w.Call(ctx, "msg.send", map[string]any{"to": "parent", "body": body}, nil)
		if err != nil {
			failed = err
		}
	}
	require.True(t, wireCode(failed) == wire.CodeInternal || errors.Is(failed, client.ErrClosed), "%v", failed)
	require.Equal(t, 1, d.exitCode(), "log:\n%s", d.log())
	require.Contains(t, d.log(), "the engine stopped after a commit error")

	code, out := runToExit(t, d.bin, "--data", d.data, "--socket", d.socket)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "daemon: disk-full: ")
}

// runToExit runs crewd with args, expecting it to exit by itself, and returns its status and its output.
func runToExit(t *testing.T, bin string, args ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(startTimeout):
		cmd.Process.Kill()
		<-done
		t.Fatalf("crewd did not exit within %v:\n%s", startTimeout, out.String())
	}
	return cmd.ProcessState.ExitCode(), out.String()
}

// fullStore leaves d's store with unflushed writes in its WAL on a tmpfs filled to the last byte: reopening it
// makes Pebble flush them, which fails and is retried, without end.
func fullStore(ctx context.Context, t *testing.T, d *daemon) {
	c := newCrew(ctx, t, d, "01_w")
	w := d.mustDial(ctx, c.workers["01_w"])
	for i := range 20 {
		require.NoError(t, w.Call(ctx, "msg.send", map[string]any{"to": "parent", "body": fmt.Sprint("m", i)}, nil))
	}
	d.stop()
	fill(t, d.data, 0)
}

// startStuck runs crewd on a full store and returns once Pebble has reported its failing flush: crewd is then in
// the open that used to spin for ten minutes and ignore SIGTERM.
func startStuck(t *testing.T, d *daemon, args ...string) (cmd *exec.Cmd, exited <-chan struct{}, out *syncBuffer) {
	t.Helper()
	out = &syncBuffer{}
	cmd = exec.Command(d.bin, append([]string{"--data", d.data, "--socket", d.socket, "--min-free-mib", "0"}, args...)...)
	r, w, err := os.Pipe()
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = w, w
	require.NoError(t, cmd.Start())
	w.Close()
	stuck := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(r)
		signalled := false
		for sc.Scan() {
			out.WriteLine(sc.Text())
			if !signalled && strings.Contains(sc.Text(), "no space left on device") {
				signalled = true
				close(stuck)
			}
		}
		cmd.Wait()
		if !signalled {
			close(stuck)
		}
	}()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	select {
	case <-stuck:
	case <-time.After(startTimeout):
		t.Fatalf("crewd reported no failing flush within %v:\n%s", startTimeout, out.String())
	}
	select {
	case <-done:
		t.Fatalf("crewd exited before it was stuck in the open: %v\n%s", cmd.ProcessState, out.String())
	default:
	}
	return cmd, done, out
}

// waitExit waits (bounded, against a hung test) for a process started by startStuck.
func waitExit(t *testing.T, cmd *exec.Cmd, exited <-chan struct{}, out *syncBuffer) int {
	t.Helper()
	select {
	case <-exited:
	case <-time.After(startTimeout):
		t.Fatalf("crewd did not exit within %v:\n%s", startTimeout, out.String())
	}
	return cmd.ProcessState.ExitCode()
}

// TestSigtermDuringSlowOpen: the first SIGTERM ends a crewd stuck opening a store on a full disk, with status 1,
// and the failing flush is logged a few times, not thousands.
func TestSigtermDuringSlowOpen(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	d := newDaemonOn(t, 48, "--min-free-mib", "0")
	d.start()
	fullStore(ctx, t, d)

	cmd, exited, out := startStuck(t, d, "--open-timeout", "0s")
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 1, waitExit(t, cmd, exited, out), out.String())
	require.Contains(t, out.String(), "daemon: open the event log: gave up")
	require.Less(t, strings.Count(out.String(), "no space left on device"), 10, "repeated errors are rate-limited:\n%s", out.String())

	// The open deadline ends it too, without a signal.
	cmd, exited, out = startStuck(t, d, "--open-timeout", "1s")
	require.Equal(t, 1, waitExit(t, cmd, exited, out), out.String())
	require.Contains(t, out.String(), "open timeout reached (--open-timeout)")
}

// syncBuffer is a line buffer written by one goroutine and read by the test's.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) WriteLine(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.WriteString(line + "\n")
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
