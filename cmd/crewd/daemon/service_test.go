package daemon

import (
	"bufio"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestServiceUnitAllowsWhatCrewdBinds: the crewd that docs/crewd.service starts may open every socket it needs. A
// unit that restricts address families to AF_UNIX makes the dashboard's TCP listener (on by default) fail to bind,
// and an address that cannot be bound for any reason but being in use stops the start: the unit restarted crewd
// until systemd gave up.
func TestServiceUnitAllowsWhatCrewdBinds(t *testing.T) {
	unit := readUnitSection(t, filepath.Join("..", "..", "..", "docs", "crewd.service"), "[Service]")
	start := strings.Fields(unit["ExecStart"])
	require.NotEmpty(t, start, "ExecStart")
	args := start[1:]
	// The socket group exists only where the unit is installed (useradd and groupadd in its header).
	if i := slices.Index(args, "--socket-group"); i >= 0 {
		args = slices.Delete(args, i, i+2)
	}
	c, err := Load(args, envOf(map[string]string{"HOME": "/nonexistent"}))
	require.NoError(t, err)

	families := strings.Fields(unit["RestrictAddressFamilies"])
	require.Contains(t, families, "AF_UNIX", "the broker's socket")
	if c.HTTPAddr != "" {
		host, _, err := net.SplitHostPort(c.HTTPAddr)
		require.NoError(t, err)
		family := "AF_INET6"
		if ip := net.ParseIP(host); ip == nil || ip.To4() != nil {
			family = "AF_INET"
		}
		require.Contains(t, families, family, "the dashboard listens on %s (--http)", c.HTTPAddr)
	}
}

// readUnitSection returns the settings of a section ("[Service]", "[Unit]") of a systemd unit file (the last value
// of each key).
func readUnitSection(t *testing.T, path, want string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	settings := map[string]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == want:
			k, v, ok := strings.Cut(line, "=")
			require.True(t, ok, "%s: %q", path, line)
			settings[k] = v
		}
	}
	require.NoError(t, sc.Err())
	return settings
}
