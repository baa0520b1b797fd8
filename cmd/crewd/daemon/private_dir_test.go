package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPrivateDirChecks: a data directory (or store) is crewd's alone: owned by its uid, with no group or other
// permission bit, read, write or enter alike (docs/security.md). Each bit is refused on its own, and the owner too.
func TestPrivateDirChecks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mode  os.FileMode
		owner int // -1: crewd's own uid
		want  string
	}{
		{"owner only", 0o700, -1, ""},
		{"owner read only", 0o500, -1, ""},
		{"group read", 0o740, -1, "has mode 0740"},
		{"group write", 0o720, -1, "has mode 0720"},
		{"group enter", 0o710, -1, "has mode 0710"},
		{"others read", 0o704, -1, "has mode 0704"},
		{"others write", 0o702, -1, "has mode 0702"},
		{"others enter", 0o701, -1, "has mode 0701"},
		{"another user's", 0o700, os.Geteuid() + 1, fmt.Sprintf("belongs to uid %d", os.Geteuid()+1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			require.NoError(t, os.Mkdir(dir, 0o700))
			require.NoError(t, os.Chmod(dir, tc.mode))
			if tc.owner >= 0 {
				if os.Geteuid() != 0 {
					t.Skip("giving a directory to another user needs root")
				}
				require.NoError(t, os.Chown(dir, tc.owner, -1))
			}
			err := MakePrivateDir(dir)
			if tc.want == "" {
				require.NoError(t, err)
			} else {
				require.ErrorContains(t, err, tc.want)
			}
			fi, err := os.Stat(dir)
			require.NoError(t, err)
			require.Equal(t, tc.mode, fi.Mode().Perm(), "never chmod-ed")
		})
	}
}
