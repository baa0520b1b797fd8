package bench

import (
	"fmt"
	"strings"
	"time"

	"github.com/crewlog/crewlog/commands"
)

// grouper is a store whose writer commits its commands in groups (crewlog's
// engine, in this process or behind the socket): a cell reports how large
// its groups were.
type grouper interface{ groupStats() commands.Stats }

func (s *engineStore) groupStats() commands.Stats { return s.eng.Stats() }

// GroupSizes is what a cell's groups held: the groups committed from its
// clients' start to the last operation finished, their commands, the
// groups by size (commands.Stats.Sizes' classes), and the time their
// appends took and the writer's part of it (commands.Stats.Appending and
// Staging).
type GroupSizes struct {
	Groups, Commands   uint64
	Sizes              [commands.GroupSizeClasses]uint64
	Appending, Staging time.Duration
}

// groupSizesBetween is what was committed between two readings of a store's
// counters.
func groupSizesBetween(before, after commands.Stats) *GroupSizes {
	g := &GroupSizes{Groups: after.Groups - before.Groups, Commands: after.Commands - before.Commands,
		Appending: after.Appending - before.Appending, Staging: after.Staging - before.Staging}
	for i := range g.Sizes {
		g.Sizes[i] = after.Sizes[i] - before.Sizes[i]
	}
	return g
}

// String is the mean commands per group, each size class's share of the
// groups and, when the store times its appends, a group's mean append, e.g.
// "32.1 commands/group over 500 groups; groups of 1: 3%, 2-3: 1%, …,
// 32-63: 48%; a group's append 941 µs from hand-off to durable, 247 µs of
// it staged by the writer".
func (g *GroupSizes) String() string {
	if g.Groups == 0 {
		return "no groups"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%.1f commands/group over %d groups; groups of", float64(g.Commands)/float64(g.Groups), g.Groups)
	sep := " "
	for i, n := range g.Sizes {
		if n == 0 {
			continue
		}
		fmt.Fprintf(&b, "%s%s: %.0f%%", sep, sizeClass(i), 100*float64(n)/float64(g.Groups))
		sep = ", "
	}
	if g.Appending > 0 {
		n := time.Duration(g.Groups)
		fmt.Fprintf(&b, "; a group's append %s from hand-off to durable, %s of it staged by the writer",
			fmtDur(g.Appending/n), fmtDur(g.Staging/n))
	}
	return b.String()
}

// sizeClass names class i of commands.Stats.Sizes.
func sizeClass(i int) string {
	switch {
	case i == 0:
		return "0"
	case i == 1:
		return "1"
	case i == commands.GroupSizeClasses-1:
		return fmt.Sprintf("%d+", 1<<(i-1))
	}
	return fmt.Sprintf("%d-%d", 1<<(i-1), 1<<i-1)
}
