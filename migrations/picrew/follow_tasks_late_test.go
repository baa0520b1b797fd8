package picrew

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFollowerReadsATaskAddedWhileItReadsTheEvents: pi-crew adds a task to tasks.json (a delegation's shadow, a
// workflow task) before it appends a line naming it. A follower's pass reads tasks.json, then the events: a task
// added, and a line naming it appended, between the two reads had the line skipped for good, for naming no task of
// tasks.json, though tasks.json held the task when the line was read, and an admission of a shadow so added was
// recorded without the shadow's title and cwd. tasks.json is read again, once per read of a file, when a line names
// a task the tasks read lack, so the line is imported as the one-shot import of the same files imports it.
func TestFollowerReadsATaskAddedWhileItReadsTheEvents(t *testing.T) {
	for name, c := range map[string]struct {
		typ, task string
		shadow    string // the task added: task when empty
		data      map[string]any
	}{
		"a shadow's question": {typ: "ask.requested", task: "gc-1",
			data: map[string]any{"questionId": "q-1", "timeoutSec": 60}},
		"a workflow task's start": {typ: "task.started", task: "02_exec"},
		"a shadow's admission": {typ: "delegate.admitted", task: "01_plan", shadow: "gc-2",
			data: map[string]any{"subId": "gc-2", "reservedTokens": 10, "timeoutSec": 60}},
	} {
		t.Run(name, func(t *testing.T) {
			root := newRoot(t)
			a := newRun(t, root, runA)
			require.NoError(t, a.AddTask("01_plan", "planner"))
			require.NoError(t, a.SetStatus("running"))
			_, err := a.Event("task.started", "01_plan", nil)
			require.NoError(t, err)
			sink := newMemSink()
			_, pass, reported := stepFollower(t, root.Dir, sink)
			pass()

			_, err = a.Event("task.progress", "01_plan", nil) // the next pass reads the events
			require.NoError(t, err)
			var seq uint64
			open := openOS
			openOS = func(cr *crewRoot, p string, flag int) (*os.File, error) {
				if p == a.EventsPath() && seq == 0 {
					// After the pass read tasks.json: pi-crew adds the task, then appends the line naming it.
					switch {
					case c.shadow != "":
						require.NoError(t, a.AddShadow(c.shadow, "explorer"))
					case c.task == "gc-1":
						require.NoError(t, a.AddShadow(c.task, "explorer"))
					default:
						require.NoError(t, a.AddTask(c.task, "executor"))
					}
					seq, err = a.Event(c.typ, c.task, c.data)
					require.NoError(t, err)
				}
				return open(cr, p, flag)
			}
			t.Cleanup(func() { openOS = open })
			pass()
			openOS = open
			pass()
			require.NotZero(t, seq, "the pass read the events")
			require.Contains(t, mustImported(sink), "import:"+runA+":seq:"+itoa(seq))
			for _, s := range *reported {
				require.NotContains(t, s.Reason, "not a task of tasks.json")
				require.NotContains(t, s.Reason, "not a workflow task of tasks.json")
			}
			requireCopy(t, root.Dir, sink, copyOf{live: true})
			require.Empty(t, differingWrites(t, root.Dir, sink), "the writes are the import's")
		})
	}
}
