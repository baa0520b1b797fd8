package picrew

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/migrations/picrew/picrewtest"
)

// TestAFollowerWaitsTwoStillSecondsByDefault: a follower given no SettleAfter waits 2 s, as docs/picrew.md says, of
// files that stay still before it reconciles a finished run, and before it reports a partial last line that stayed
// (a writer that stopped mid-line): neither a nanosecond before, both at 2 s. The clock is the follower's own,
// moved by the test.
func TestAFollowerWaitsTwoStillSecondsByDefault(t *testing.T) {
	for name, c := range map[string]struct {
		write func(t *testing.T, a *picrewtest.Run)
		done  func(ids []string, reported []Skipped) bool
	}{
		"a finished run is reconciled": {
			// No line records the task's or the run's end, which the reconcile supplies from the files.
			write: func(t *testing.T, a *picrewtest.Run) {
				require.NoError(t, a.AddTask("01_plan", "planner"))
				require.NoError(t, a.SetTask("01_plan", "completed"))
				require.NoError(t, a.SetStatus("completed"))
			},
			done: func(ids []string, _ []Skipped) bool {
				return slices.ContainsFunc(ids, func(id string) bool { return strings.Contains(id, ":reconcile:") })
			},
		},
		"a partial last line is reported": {
			write: func(t *testing.T, a *picrewtest.Run) {
				require.NoError(t, a.AddTask("01_plan", "planner"))
				require.NoError(t, a.SetStatus("running"))
				_, err := a.Event("task.progress", "01_plan", map[string]any{"n": 1})
				require.NoError(t, err)
				appendPartial(t, a.EventsPath(), `{"type":"task.progress","runId":"`+runA+`",`)
			},
			done: func(_ []string, reported []Skipped) bool {
				return slices.ContainsFunc(reasonsFor(reported, "state/runs/"+runA+"/events.jsonl"),
					func(r string) bool { return strings.Contains(r, "partial last line") })
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			root := newRoot(t)
			c.write(t, newRun(t, root, runA))
			sink := newMemSink()
			var reported []Skipped
			fl := NewFollower(root.Dir, sink, &FollowOptions{Report: func(s Skipped) { reported = append(reported, s) }})
			fl.cks = map[string]events.ImportCheckpoint{} // what Run loads first: no checkpoint yet
			now := time.Now()
			fl.o.now = func() time.Time { return now }
			passAt := func(after time.Duration) bool {
				now = now.Add(after)
				fl.pass(t.Context(), filepath.Join(root.Dir, "state", "runs"), true, nil)
				ids, _ := sink.imported()
				return c.done(ids, reported)
			}

			require.False(t, passAt(0), "at once")
			require.False(t, passAt(2*time.Second-time.Nanosecond), "a nanosecond before 2 s")
			require.True(t, passAt(time.Nanosecond), "at 2 s")
		})
	}
}
