package commands

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// Stats.Sizes' classes as its comment states them: none, 1, 2-3, then
// powers of two, and every group of 1024 commands or more in the last.
// crewbench names the classes from the same table (groupsizes_test.go).
func TestGroupSizeClass(t *testing.T) {
	for _, c := range []struct{ n, class int }{
		{0, 0}, {1, 1}, {2, 2}, {3, 2}, {4, 3}, {1023, 10}, {1024, 11}, {5000, 11},
	} {
		require.Equal(t, c.class, groupSizeClass(c.n), "a group of %d", c.n)
	}
	require.Equal(t, GroupSizeClasses-1, groupSizeClass(1<<30), "the last class holds every larger group")
}

// Stats.Appending sums, over the committed groups, the time from each
// group's hand-off to its being durable, and Staging the writer's share of
// it: after committed groups both are positive, and the part is no longer
// than the whole.
func TestStatsTimeEachGroupsAppend(t *testing.T) {
	f := openEngine(t, vfs.NewMem(), newTestClock(), nil)
	before := f.eng.Stats()
	require.Zero(t, before.Appending)
	f.seedRun("R", 1000)
	st := f.eng.Stats()
	require.Equal(t, uint64(4), st.Groups, "one group per sequential command")
	require.Positive(t, st.Staging)
	require.Greater(t, st.Appending, st.Staging, "the sync comes after the staging")
}
