package bench

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/cmd/crewd/daemon"
)

// TestSocketCellRunsCrewdAsItShips: the socket cell's crewd decides under the
// engine config of every crewlog cell (benchConfig), and is otherwise crewd
// with its defaults but for what socketCrewdArgs says why: no pacing, and the
// dashboard on a port the system picks.
func TestSocketCellRunsCrewdAsItShips(t *testing.T) {
	home := t.TempDir()
	env := daemon.Env{Getenv: func(k string) string {
		if k == "HOME" {
			return home
		}
		return ""
	}, UID: os.Getuid()}
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
