package bench

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/cmd/crewd/daemon"
)

// TestBenchConfigIsCrewdsDefaults: every crewlog cell decides under the
// engine config crewd ships, but for what the workload needs and benchConfig
// says why (nesting on, its slot pool, no slot share, quotas out of a
// window's reach), so crewlog is not timed skipping a rule or a check crewd
// runs.
func TestBenchConfigIsCrewdsDefaults(t *testing.T) {
	cfg, err := daemon.Load(nil, homeEnv(t.TempDir()))
	require.NoError(t, err)
	want := cfg.Engine
	want.NestingEnabled, want.MaxSlots, want.SlotShare = true, timedSlots, 0
	want.QuotaEvents, want.QuotaBytes = benchQuota, benchQuota
	require.Equal(t, want, benchConfig(timedSlots))
}

// homeEnv is an environment for daemon.Load with nothing set but HOME: crewd's defaults, its data directory under
// home.
func homeEnv(home string) daemon.Env {
	return daemon.Env{Getenv: func(k string) string {
		if k == "HOME" {
			return home
		}
		return ""
	}, UID: os.Getuid()}
}
