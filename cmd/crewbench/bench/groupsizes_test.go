package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/commands"
)

// The name of each class of commands.Stats.Sizes holds the group sizes
// the class counts (the same table as the commands package's
// TestGroupSizeClass), so the report's labels cannot drift from the
// classes.
func TestSizeClassNamesTheClass(t *testing.T) {
	for _, c := range []struct {
		n, class int
		name     string
	}{
		{0, 0, "0"}, {1, 1, "1"}, {2, 2, "2-3"}, {3, 2, "2-3"}, {4, 3, "4-7"},
		{1023, 10, "512-1023"}, {1024, 11, "1024+"}, {5000, 11, "1024+"},
	} {
		require.Equal(t, c.name, sizeClass(c.class), "a group of %d", c.n)
	}
	require.Equal(t, 12, commands.GroupSizeClasses, "a class was added: extend the table")
}

func TestGroupSizesString(t *testing.T) {
	require.Equal(t, "no groups", (&GroupSizes{}).String())
	g := &GroupSizes{Groups: 4, Commands: 2 + 3 + 1024 + 5000}
	g.Sizes[2], g.Sizes[11] = 2, 2
	require.Equal(t, "1507.2 commands/group over 4 groups; groups of 2-3: 50%, 1024+: 50%", g.String())
	g.Appending, g.Staging = 4*941*time.Microsecond, 4*247*time.Microsecond
	require.Equal(t, "1507.2 commands/group over 4 groups; groups of 2-3: 50%, 1024+: 50%; "+
		"a group's append 941 µs from hand-off to durable, 247 µs of it staged by the writer", g.String())
}
