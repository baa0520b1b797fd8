package broker

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/brokertest"
)

// peerProbeSocketEnv names the socket the test binary, run again as another user, connects to (holdConnection).
const peerProbeSocketEnv = "CREWLOG_TEST_PEER_PROBE_SOCKET"

// TestThePeerCheckReadsTheSupplementaryGroups: a process of another uid is let in when it is in the socket group,
// by its primary group or by a supplementary one, which the kernel's record of the peer (SO_PEERCRED) does not hold
// and the broker reads from /proc/<pid>/status; a process of another uid outside the group, which the file modes
// did not stop (root, or a process handed a descriptor), is closed before it can read a frame.
func TestThePeerCheckReadsTheSupplementaryGroups(t *testing.T) {
	if path := os.Getenv(peerProbeSocketEnv); path != "" {
		holdConnection(path)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("connecting as another user needs root")
	}
	const workerUID, workerGID, group = 12345, 12345, 4242
	// A tree the worker can reach: the test's own temporary directories are root's alone.
	base := brokertest.SocketDir(t)
	require.NoError(t, os.Chmod(base, 0o711))
	probe := filepath.Join(base, "probe")
	bin, err := os.ReadFile(os.Args[0])
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(probe, bin, 0o755))

	for _, tc := range []struct {
		name     string
		groups   []uint32 // the worker's supplementary groups
		admitted bool
	}{
		{"in the socket group by a supplementary group", []uint32{7, group}, true},
		{"outside the socket group", []uint32{7}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock := filepath.Join(base, fmt.Sprintf("d%v", tc.admitted), "b.sock")
			f := newFixture(t, fixtureOpts{opts: Options{SocketPath: sock, SocketGroup: group, HelloTimeout: time.Minute}})
			if !tc.admitted {
				// The file modes would stop this worker before the broker sees it; open them, as root's
				// permissions are, so that the peer check is what decides.
				require.NoError(t, os.Chmod(filepath.Dir(sock), 0o755))
				require.NoError(t, os.Chmod(sock, 0o666))
			}
			cmd := exec.Command(probe, "-test.run=^TestThePeerCheckReadsTheSupplementaryGroups$")
			cmd.Env = append(os.Environ(), peerProbeSocketEnv+"="+sock)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: workerUID, Gid: workerGID,
				Groups: tc.groups}}
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			require.NoError(t, cmd.Start())
			if !tc.admitted {
				ended := make(chan error, 1)
				go func() { ended <- cmd.Wait() }()
				select {
				case err := <-ended:
					require.NoError(t, err, "%s", &out)
				case <-time.After(guard):
					_ = cmd.Process.Kill()
					recv(t, ended, "end of the killed probe")
					require.Fail(t, "the broker kept the connection of a peer outside the socket group", "%s", &out)
				}
				require.Contains(t, out.String(), "probe: closed after 0 bytes")
				return
			}
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				if t.Failed() {
					t.Logf("probe: %s", &out)
				}
			})
			f.awaitConns(1)
		})
	}
}

// holdConnection is the probe: it connects to the socket at path and reads until the broker closes the connection,
// then says how much it read.
func holdConnection(path string) {
	c, err := net.Dial("unix", path)
	if err != nil {
		fmt.Println("probe:", err)
		os.Exit(3)
	}
	n, _ := io.Copy(io.Discard, c)
	fmt.Printf("probe: closed after %d bytes\n", n)
}
