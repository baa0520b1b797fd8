package picrew

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/migrations/picrew/picrewtest"
)

// TestAFinishedRunKeptFromSleepIsNotReadBackAtEveryPass: after every pass a finished run is checked for whether it
// can be let go (its files as checkpointed), and one that cannot, kept by a partial last line, had the last line of
// each of its other files read back at every pass, though the follower had read each to its checkpoint and looked at
// it at every pass (readTail). A file the follower holds as checkpointed is taken as it holds it.
func TestAFinishedRunKeptFromSleepIsNotReadBackAtEveryPass(t *testing.T) {
	root := newRoot(t)
	a := newRun(t, root, runA)
	runSteps(t, picrewtest.Lifecycle(a, 12))
	steering := filepath.Join(root.Dir, "artifacts", runA, "steering", "01_plan.jsonl")
	appendPartial(t, steering, `{"id":"steer_cut","taskId":"01_plan",`)
	sink := newMemSink()
	fl, pass, _ := stepFollower(t, root.Dir, sink)
	for range 4 {
		pass()
	}
	r := fl.runs[runA]
	require.Equal(t, "completed", r.reconciled, "the finished run is reconciled")
	require.False(t, r.dormant, "the partial last line keeps it from being let go")
	opens := countOpens(t, a.EventsPath())
	for range 5 {
		pass()
	}
	require.Zero(t, opens.Load(), "opens of the run's events.jsonl, read to its end")
	require.False(t, r.dormant)

	appendPartial(t, steering, `"text":"go on"}`+"\n")
	for range 4 {
		pass()
	}
	require.True(t, fl.runs[runA].dormant, "let go once the line is complete")
	requireCopy(t, root.Dir, sink, copyOf{})
}
