package picrew

import (
	"os"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/migrations/picrew/picrewtest"
)

// TestAPollingFollowerLooksAtAFinishedRunEveryTenPasses: a finished run let go (dormant) is looked at without a
// notification only every dormantEvery full passes, a look being a stat of each of its files and a listing of each of
// its directories; a follower without notifications (none available, or turned off) looked at every one at every
// poll, four times a second: a root of thousands of finished runs cost it a stat of each of their files at every
// pass. A change to such a run is still imported, within dormantEvery passes.
func TestAPollingFollowerLooksAtAFinishedRunEveryTenPasses(t *testing.T) {
	root := newRoot(t)
	a := newRun(t, root, runA)
	runSteps(t, picrewtest.Lifecycle(a, 2))
	sink := newMemSink()
	fl, pass, _ := stepFollower(t, root.Dir, sink)
	dormant := func() bool { r := fl.runs[runA]; return r != nil && r.dormant }
	for i := 0; i < 10 && !dormant(); i++ {
		pass()
	}
	require.True(t, dormant(), "the finished run is let go")

	var looks atomic.Int64
	list := readDir
	readDir = func(cr *crewRoot, p string) ([]os.DirEntry, error) {
		if p == a.Dir {
			looks.Add(1)
		}
		return list(cr, p)
	}
	t.Cleanup(func() { readDir = list })
	for range 2 * dormantEvery {
		pass()
	}
	require.LessOrEqual(t, looks.Load(), int64(2), "looks at the finished run in %d passes", 2*dormantEvery)

	seq, err := a.Event("task.progress", "02_exec", map[string]any{"late": true})
	require.NoError(t, err)
	for range dormantEvery {
		pass()
	}
	require.Contains(t, mustImported(sink), "import:"+runA+":seq:"+itoa(seq), "the change is imported")
}
