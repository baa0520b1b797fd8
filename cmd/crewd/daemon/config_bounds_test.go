package daemon

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/commands"
)

// TestLoadBoundsAreInclusive: every bound --help states with numbers takes its last value and refuses the next one,
// so a bound moved by one either way fails here.
func TestLoadBoundsAreInclusive(t *testing.T) {
	// absPath keeps an absolute path as it is, so these are the socket's lengths in bytes.
	socketOf := func(n int) string { return "/" + strings.Repeat("s", n-1) }
	for _, tc := range []struct {
		name    string
		at      []string // the bound itself: accepted
		past    []string // one past it: refused
		refusal string
	}{
		{"socket path", []string{"--socket", socketOf(maxSocketPath)}, []string{"--socket", socketOf(maxSocketPath + 1)},
			fmt.Sprintf("is %d bytes; a unix socket path is at most %d", maxSocketPath+1, maxSocketPath)},
		{"settle grace", []string{"--settle-grace", fmt.Sprintf("%ds", commands.MaxSettleGraceSec)},
			[]string{"--settle-grace", fmt.Sprintf("%ds", commands.MaxSettleGraceSec+1)}, "--settle-grace: 24h0m1s is outside 0s..86400s"},
		{"slot wait", []string{"--slot-wait", fmt.Sprintf("%ds", commands.MaxSlotWaitSec)},
			[]string{"--slot-wait", fmt.Sprintf("%ds", commands.MaxSlotWaitSec+1)}, "--slot-wait: 24h0m1s is outside 0s..86400s"},
		{"slot share none", []string{"--slot-share", "0"}, []string{"--slot-share", "-1"}, "--slot-share: -1 is outside 0..64"},
		{"slot share most", []string{"--slot-share", "64", "--max-slots", "64"}, []string{"--slot-share", "65", "--max-slots", "64"},
			"--slot-share: 65 is outside 0..64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.at, homeEnv)
			require.NoError(t, err, "the bound itself is allowed")
			_, err = Load(tc.past, homeEnv)
			require.ErrorContains(t, err, tc.refusal)
		})
	}
}
