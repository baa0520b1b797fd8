package daemon

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestConfigFileIsBounded: --config and --picrew-config are read only when they are regular files of at most
// maxSettingsFile bytes; a larger one, or a device such as /dev/zero (whose reading never ends), is refused with an
// error naming it, before crewd holds more of it than that in memory. One at the bound is read.
func TestConfigFileIsBounded(t *testing.T) {
	atBound := "{" + strings.Repeat(" ", maxSettingsFile-2) + "}"
	over := "{" + strings.Repeat(" ", maxSettingsFile-1) + "}"
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"config over the bound", []string{"--config", writeFile(t, "big.json", over)}, "big.json is larger than 1048576 bytes"},
		{"config a device", []string{"--config", "/dev/null"}, "daemon: config file /dev/null: not a regular file"},
		{"config without end", []string{"--config", "/dev/zero"}, "daemon: config file /dev/zero: not a regular file"},
		{"picrew config over the bound", []string{"--picrew-config", writeFile(t, "pi.json", over)}, "pi.json is larger than 1048576 bytes"},
		{"picrew config a device", []string{"--picrew-config", "/dev/null"}, "daemon: pi-crew config /dev/null: not a regular file"},
		{"picrew config without end", []string{"--picrew-config", "/dev/zero"}, "daemon: pi-crew config /dev/zero: not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.args, homeEnv)
			require.ErrorContains(t, err, tc.want)
		})
	}
	_, err := Load([]string{"--config", writeFile(t, "at.json", atBound), "--picrew-config", writeFile(t, "pat.json", atBound)}, homeEnv)
	require.NoError(t, err)
}
