package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/cmd/crewd/daemon"
)

// TestSocketCellRunsCrewdAsItShips: the socket cell's crewd decides under the
// engine config of every crewlog cell (benchConfig), and is otherwise crewd
// with its defaults but for what socketCrewdArgs says why: no pacing, and the
// dashboard on a port the system picks.
func TestSocketCellRunsCrewdAsItShips(t *testing.T) {
	home := t.TempDir()
	env := homeEnv(home)
	job := socketServerJob{Dir: filepath.Join(home, "crewd"), Slots: timedSlots, Socket: filepath.Join(home, "s.sock")}
	cfg, err := daemon.Load(socketCrewdArgs(job), env)
	require.NoError(t, err)
	require.Equal(t, benchConfig(job.Slots), cfg.Engine)

	want, err := daemon.Load([]string{"--data", job.Dir, "--socket", job.Socket}, env)
	require.NoError(t, err)
	want.Engine = cfg.Engine
	want.Limits.RatePerCredential, want.Limits.RatePerRun = 0, 0
	want.HTTPAddr, want.HTTPAddrSet = "127.0.0.1:0", true
	require.Equal(t, want, cfg)
}

// TestSocketServerReportsACrewdThatStoppedOnItsOwn: a crewd that stops while
// the cell runs (here on SIGINT, as on a failure of its engine) is reported
// as such when the cell ends, with its exit status, not as a child killed by
// the SIGTERM meant for a crewd that no longer listens for it.
func TestSocketServerReportsACrewdThatStoppedOnItsOwn(t *testing.T) {
	sockDir, err := os.MkdirTemp("", "crewbench-")
	require.NoError(t, err)
	defer os.RemoveAll(sockDir)
	s, err := startSocketServer(t.TempDir(), 4, filepath.Join(sockDir, "s", "crewd.sock"), randomHex(32))
	require.NoError(t, err)
	require.FileExists(t, s.socket)
	require.NoError(t, s.cmd.Process.Signal(os.Interrupt))
	// NB: the child ends by itself, before the parent closes its stdin: a zombie until it is waited for.
	stat := fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid)
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(stat)
		_, after, _ := strings.Cut(string(b), ") ")
		return err == nil && strings.HasPrefix(after, "Z")
	}, 30*time.Second, 10*time.Millisecond)
	err = s.stop()
	require.ErrorContains(t, err, "crewd exited with status 0 while it served")
}
