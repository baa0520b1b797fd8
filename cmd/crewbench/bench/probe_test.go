package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// probeSyncCall is a sync call in strace's trace of the probe: "123 fdatasync(3) = 0".
var probeSyncCall = regexp.MustCompile(`^\d+\s+(fsync|fdatasync)\(`)

// probeSyncEnv makes the test binary run the host probe's synced writes in the directory it names, and exit.
const probeSyncEnv = "CREWBENCH_TEST_PROBE_SYNC"

// TestProbeSyncIsFdatasync: the probe's synced write is what the report calls it, a 4 KiB write and fdatasync, the
// file store's own sync, into pages the file already holds: os.File.Sync is fsync, which also writes the inode's
// times, so the probe timed a heavier sync than the one it names.
func TestProbeSyncIsFdatasync(t *testing.T) {
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace is not installed")
	}
	self, err := os.Executable()
	require.NoError(t, err)
	trace := filepath.Join(t.TempDir(), "syscalls.trace")
	cmd := exec.Command(strace, "-f", "-qq", "-e", "signal=none", "-e", "trace=fsync,fdatasync", "-o", trace, self)
	cmd.Env = append(os.Environ(), probeSyncEnv+"="+t.TempDir())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	b, err := os.ReadFile(trace)
	require.NoError(t, err)
	calls := map[string]int{}
	for _, line := range strings.Split(string(b), "\n") {
		if m := probeSyncCall.FindStringSubmatch(line); m != nil {
			calls[m[1]]++
		}
	}
	require.Equal(t, syncRepeats, calls["fdatasync"], "every timed write is followed by an fdatasync: %v", calls)
	require.Equal(t, 1, calls["fsync"], "one fsync, of the pages written before the timed writes: %v", calls)
}
