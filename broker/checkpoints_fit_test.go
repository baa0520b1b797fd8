package broker

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/broker/wire"
)

// TestCheckpointsPastALongPath: in the smallest frame a daemon allows, and in one of 4 KiB, an import's checkpoints
// whose paths take more than half of a page each are read whole by following the cursor: every checkpoint once, in
// path order, each answer within the frame. The cursor is not the page's last path again (which left no room for
// the checkpoint beside it: import.checkpoints answered oversize-frame at it for good, and a follower could not
// start), so a page holds a checkpoint whenever it fits in a frame alone. A path passed as the cursor, as a crewd
// before answered it, still reads the checkpoints after it.
func TestCheckpointsPastALongPath(t *testing.T) {
	for _, tc := range []struct {
		frame, long int
		// shared: the long paths differ in their last char only, so no cursor between two of them is shorter.
		shared bool
	}{{wire.MaxFrameFloor, 450, false}, {4096, 2000, false}, {wire.MaxFrameFloor, 450, true}, {4096, 2000, true}} {
		t.Run(fmt.Sprint(tc.frame, " shared ", tc.shared), func(t *testing.T) {
			f := newFixture(t, fixtureOpts{opts: Options{MaxFrame: tc.frame}})
			f.seed()
			a := f.dial()
			a.helloAdmin()
			var paths []string
			for i, dir := range []string{"a", "b", "c", "d", "e", "f"} {
				path := "/" + dir
				switch {
				case i == 0 || i == 5: // long paths one after another between them: no short one to end a page on
				case tc.shared:
					path = "/e/" + strings.Repeat("x", tc.long) + dir
				default:
					path += "/" + strings.Repeat("x", tc.long)
				}
				a.ok(methodImportAppend, importCheckpoint(dir, path))
				paths = append(paths, path)
			}
			pages := pager{t: t, frame: tc.frame}
			require.Equal(t, paths, pages.all(a, methodImportCheckpoints, map[string]any{"source": "test"},
				"checkpoints", "path"))
			require.Equal(t, paths[2:], pages.all(a, methodImportCheckpoints, map[string]any{"source": "test",
				"cursor": paths[1]}, "checkpoints", "path"))
		})
	}
}
