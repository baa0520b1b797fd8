package commands

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/projections"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestRunChangedWakesOnlyThatRun: a commit of run B leaves run A's channel open; a commit of run A closes it, and
// the state a woken reader sees holds the commit.
func TestRunChangedWakesOnlyThatRun(t *testing.T) {
	f := openEngine(t, vfs.NewMem(), newTestClock(), nil)
	f.seedRun("A", 0)
	f.seedRun("B", 0)
	a, b := f.eng.RunChanged("A"), f.eng.RunChanged("B")
	all := f.eng.Changed()
	f.do(&TaskUsage{RunID: "B", TaskID: "02_exec", Input: 1, Output: 1})
	require.True(t, closed(all), "Changed wakes at every publish")
	require.True(t, closed(b))
	require.False(t, closed(a), "a commit of B does not wake A's followers")
	f.do(&TaskUsage{RunID: "A", TaskID: "02_exec", Input: 7, Output: 1})
	require.True(t, closed(a))
	var input int64
	f.eng.Read(func(st *projections.State) {
		task, _ := st.Task("A", "02_exec")
		input = task.Usage.Input
	})
	require.Equal(t, int64(7), input, "the publish that woke A carries A's event")
	require.False(t, closed(f.eng.RunChanged("A")), "a fresh channel waits for the next commit")
}
