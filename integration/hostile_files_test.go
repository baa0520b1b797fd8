package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/client"
)

// TestUnsafeDirectoriesRefused: a data directory or a socket directory that others may reach stops the start
// with status 1 and a message saying what to fix, and is left as it was (it may be shared). Modes are checked,
// not access, so this holds as root.
func TestUnsafeDirectoriesRefused(t *testing.T) {
	d := newDaemon(t)
	require.NoError(t, os.MkdirAll(d.data, 0o700))
	require.NoError(t, os.Chmod(d.data, 0o755))
	code, out := runToExit(t, d.bin, "--data", d.data, "--socket", d.socket)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "has mode 0755: group or others may reach the store")
	requireMode(t, d.data, 0o755)
	require.NoFileExists(t, filepath.Join(d.data, "admin.token"))

	require.NoError(t, os.Chmod(d.data, 0o700))
	shared := filepath.Dir(d.socket)
	require.NoError(t, os.MkdirAll(shared, 0o700))
	require.NoError(t, os.Chmod(shared, 0o755))
	code, out = runToExit(t, d.bin, "--data", d.data, "--socket", d.socket)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "socket directory "+shared+" has mode 0755")
	requireMode(t, shared, 0o755)
	require.NoFileExists(t, d.socket)
}

func requireMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, want, fi.Mode().Perm(), path)
}

// The peer probe: the test binary re-executed as another user connects to a socket with the admin token and
// pings (TestMain runs peerProbe instead of the tests when probeSocketEnv is set).
const (
	probeSocketEnv = "CREWLOG_PROBE_SOCKET"
	probeTokenEnv  = "CREWLOG_PROBE_TOKEN"
)

func peerProbe(socket string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, socket, client.Hello{Role: "admin", Token: os.Getenv(probeTokenEnv)}, nil)
	if err == nil {
		err = c.Call(ctx, "ping", map[string]any{}, nil)
		c.Close()
	}
	if err != nil {
		fmt.Println("probe:", err)
		return 3
	}
	fmt.Println("probe: ok")
	return 0
}

// TestDedicatedUserAndPeerCredentials runs crewd as a dedicated user (65534) with --socket-group: the socket is
// 0660 and its directory 0750 with that group; a process of another uid in the group is served; root, another
// uid outside the group whom file modes do not stop, is refused by the peer-credential check (SO_PEERCRED).
func TestDedicatedUserAndPeerCredentials(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("running crewd as another user needs root; CI runs as root")
	}
	const daemonUID, group, workerUID = 65534, 65534, 12345
	ctx := testContext(t, 2*time.Minute)
	// A tree the dedicated user can reach: the test's own temp dirs are root's alone.
	base, err := os.MkdirTemp("", "crewlog-peer-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	require.NoError(t, os.Chmod(base, 0o711))
	bin := filepath.Join(base, "crewd")
	copyFile(t, crewdBinary(t), bin, 0o755)
	probe := filepath.Join(base, "probe")
	copyFile(t, os.Args[0], probe, 0o755)
	data := filepath.Join(base, "data")
	require.NoError(t, os.Mkdir(data, 0o700))
	require.NoError(t, os.Chown(data, daemonUID, group))
	run := filepath.Join(base, "run") // crewd's user cannot create it in base
	require.NoError(t, os.Mkdir(run, 0o750))
	require.NoError(t, os.Chown(run, daemonUID, group))

	d := &daemon{t: t, bin: bin, data: data, socket: filepath.Join(run, "crewd.sock"),
		args: []string{"--socket-group", fmt.Sprint(group)}, cred: &syscall.Credential{Uid: daemonUID, Gid: group}}
	t.Cleanup(d.cleanup)
	d.start()
	fi, err := os.Lstat(d.socket)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o660), fi.Mode().Perm())
	require.EqualValues(t, group, fi.Sys().(*syscall.Stat_t).Gid)
	requireMode(t, filepath.Join(data, "admin.token"), 0o600)

	// A worker of another uid in the socket group is served.
	cmd := exec.Command(probe)
	cmd.Env = append(os.Environ(), probeSocketEnv+"="+d.socket, probeTokenEnv+"="+d.adminToken())
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: workerUID, Gid: group}}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "probe: ok")

	// Root may open the socket whatever its mode, but is another uid outside the group: refused at accept.
	_, err = d.dial(ctx, client.Hello{Role: "admin", Token: d.adminToken()})
	require.ErrorIs(t, err, client.ErrClosed, "closed before any frame: %v", err)
	d.stop()
	require.Contains(t, d.log(), "peer-credentials")
	require.True(t, strings.Contains(d.log(), "peer uid 0"), d.log())
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, b, mode))
}
