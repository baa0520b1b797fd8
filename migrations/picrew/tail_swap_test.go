package picrew

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFollowerReadsTheFileItLooked: the follower looks at a followed file (its inode and size), then opens it to read
// what it gained, and read whatever was under its name by then: a rotation between the look and the open (the live
// file renamed to an archive, a new one begun) had the lines of the new file read from the old one's offset, in the
// middle of a line (reported corrupt), or the new file read back for the old one's last line (reported rewritten in
// place, not rotated). The opened file is read only when it is the one looked at; another is read at the next pass,
// which reports what a rotation before the look reports.
func TestFollowerReadsTheFileItLooked(t *testing.T) {
	// follow follows a run whose live file is rotated before the open-th open of it in a pass (0: before the pass),
	// and returns what was reported of it.
	follow := func(t *testing.T, open int) []string {
		root := newRoot(t)
		r := newRun(t, root, runA)
		require.NoError(t, r.AddTask("01_plan", "planner"))
		require.NoError(t, r.SetStatus("running"))
		n := 0
		event := func() {
			n++
			_, err := r.Event("task.progress", "01_plan", map[string]any{"n": n, "note": strings.Repeat("x", n)})
			require.NoError(t, err)
		}
		rotate := func() {
			require.NoError(t, r.Rotate())
			for range 15 {
				event()
			}
		}
		for range 5 {
			event()
		}
		sink := newMemSink()
		_, pass, reported := stepFollower(t, root.Dir, sink)
		pass()
		event() // the live file gains a line: the next pass looks at it, then reads it back and reads the line
		if open == 0 {
			rotate()
		}
		opens, openLive := 0, openOS
		openOS = func(c *crewRoot, p string, flag int) (*os.File, error) {
			if p == r.EventsPath() {
				if opens++; opens == open {
					rotate()
				}
			}
			return openLive(c, p, flag)
		}
		t.Cleanup(func() { openOS = openLive })
		for range 3 {
			pass()
		}
		require.GreaterOrEqual(t, opens, open, "the file was rotated while the follower read it")
		requireCopy(t, root.Dir, sink, copyOf{live: true})
		return reasonsFor(*reported, "state/runs/"+runA+"/events.jsonl")
	}
	before := follow(t, 0)
	require.Contains(t, strings.Join(before, "\n"), "replaced (rotated")
	for _, tc := range []struct {
		name string
		open int // the open of events.jsonl, in the pass, before which it is rotated
	}{
		{"before the read back of the last line read", 1},
		{"before the read of what it gained", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, before, follow(t, tc.open), "what is reported is what a rotation before the pass is")
		})
	}
}
