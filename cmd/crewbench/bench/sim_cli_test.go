package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSimHelpNamesEachDefaultOnce: sim's --socket and --token-file default to crewd's, which the flag library
// prints after the usage; the usage said "(default: crewd's default)" as well, so --help read
// "(default: crewd's default) (default "…")".
func TestSimHelpNamesEachDefaultOnce(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/4242")
	t.Setenv("XDG_DATA_HOME", "/var/tmp/crewbench-home")
	var out, errb bytes.Buffer
	require.Equal(t, 0, Main(context.Background(), []string{"sim", "--help"}, &out, &errb), errb.String())
	for flag, path := range map[string]string{
		"--socket":     "/run/user/4242/crewlog/crewd.sock",
		"--token-file": "/var/tmp/crewbench-home/crewlog/admin.token",
	} {
		var line string
		for l := range strings.Lines(out.String()) {
			if strings.Contains(l, flag+" ") {
				line = l
			}
		}
		require.NotEmpty(t, line, flag)
		require.Contains(t, line, `(default "`+path+`")`, flag)
		require.Equal(t, 1, strings.Count(line, "default"), "%s: %q", flag, line)
	}
}
