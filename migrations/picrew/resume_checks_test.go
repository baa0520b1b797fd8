package picrew

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/migrations/picrew/picrewtest"
)

// TestACheckpointResumesOnlyTheFileItWasTakenOf: a follower restarted resumes a JSONL file from its checkpoint only
// while the file is the one checkpointed: the same inode, at least as long, the line read last the same. Each check
// alone decides: a file made again under the name with the same bytes (a copy renamed over it: another inode) is
// read from its start and reported, as a shorter one or one whose last line read differs is. No test made a file of
// another inode that the other checks passed, so the inode's check could go unnoticed.
func TestACheckpointResumesOnlyTheFileItWasTakenOf(t *testing.T) {
	const content = "first\nsecond\n"
	for _, tc := range []struct {
		name  string
		after func(t *testing.T, p string)
		ok    bool
		why   string
	}{
		{"the same file", func(*testing.T, string) {}, true, ""},
		{"the same file grown", func(t *testing.T, p string) {
			require.NoError(t, picrewtest.AppendRaw(p, []byte("third\n")))
		}, true, ""},
		{"the same bytes under another inode", func(t *testing.T, p string) {
			require.NoError(t, os.WriteFile(p+".new", []byte(content), 0o644))
			require.NoError(t, os.Rename(p+".new", p))
		}, false, "replaced since the last import (rotated: another file under the same name)"},
		{"shorter", func(t *testing.T, p string) { require.NoError(t, os.Truncate(p, 6)) }, false,
			"truncated since the last import (6 bytes, 13 were read)"},
		{"its last line read rewritten", func(t *testing.T, p string) {
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.WriteAt([]byte("SECOND"), 6)
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}, false, "rewritten since the last import (the last line read differs)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "events.jsonl")
			require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
			fsys := &crewRoot{dir: dir}
			inode, size, err := fsys.fileID(p)
			require.NoError(t, err)
			c := events.ImportCheckpoint{Path: "events.jsonl", Inode: inode, Size: size, Offset: size,
				LastLineHash: lineHash([]byte("second")), Lines: 2}
			tc.after(t, p)
			ok, why := fsys.resumable(p, c)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.why, why)
		})
	}
}
