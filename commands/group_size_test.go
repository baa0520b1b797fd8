package commands

import (
	"testing"

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
