package projections

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The docs that name the snapshot format name the one written: one left at an older number tells an operator that
// the snapshot of a store written before is read, where it is refused and the state rebuilt from position 1.
func TestTheDocsNameTheSnapshotFormatWritten(t *testing.T) {
	for path, want := range map[string]string{
		"doc.go":                        fmt.Sprintf("SnapshotFormat = %d)", SnapshotFormat),
		"../docs/design-read-models.md": fmt.Sprintf("(`projections.SnapshotFormat` %d)", SnapshotFormat),
	} {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		require.True(t, strings.Contains(string(b), want), "%s does not say %q", path, want)
	}
}
