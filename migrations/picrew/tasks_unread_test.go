package picrew

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/migrations/picrew/picrewtest"
)

// TestATasksFileNotReadLeavesTheRunWithoutTasks: a run's tasks come from its tasks.json only (a task.created line is
// not read, and a line naming a task tasks.json lacks is skipped), so a tasks.json that is not read (not a regular
// file, larger than maxWholeFile) or does not decode leaves the run without tasks, and the report says so. It said
// the tasks came "from the events only", where the task lines were skipped one by one. The one-shot import and a
// follower starting alike: the follower said the tasks read before stood, where it had read none.
func TestATasksFileNotReadLeavesTheRunWithoutTasks(t *testing.T) {
	for name, c := range map[string]struct {
		write  func(t *testing.T, p string)
		reason string
	}{
		"does not decode": {
			write: func(t *testing.T, p string) {
				require.NoError(t, os.WriteFile(p, []byte(`[{"id":"01_plan",`), 0o644))
			},
			reason: "tasks.json does not decode, the run has no tasks (they come from tasks.json only): " +
				"unexpected end of JSON input",
		},
		"not a regular file": {
			write: func(t *testing.T, p string) { require.NoError(t, os.Mkdir(p, 0o755)) },
			reason: "tasks.json not read, the run has no tasks (they come from tasks.json only): " +
				"a directory, not a regular file: not read",
		},
		"larger than a whole file may be": {
			write: func(t *testing.T, p string) {
				require.NoError(t, os.WriteFile(p, nil, 0o644))
				require.NoError(t, os.Truncate(p, maxWholeFile+1))
			},
			reason: fmt.Sprintf("tasks.json not read, the run has no tasks (they come from tasks.json only): "+
				"larger than the limit of %d bytes of a file pi-crew rewrites whole: not read", maxWholeFile),
		},
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			run := timesRunCreated
			writeFiles(t, root, map[string]string{
				"state/runs/" + run + "/manifest.json": manifestOf(run, "running"),
				"state/runs/" + run + "/events.jsonl": eventLine(1, "task.created", "01_plan", `{}`) +
					eventLine(2, "task.started", "01_plan", `{}`),
			})
			c.write(t, filepath.Join(root, "state", "runs", run, "tasks.json"))
			ids, skipped := importPlan(t, root)
			require.Equal(t, []string{c.reason}, reasonsFor(skipped, "state/runs/"+run+"/tasks.json"))
			noTask := func(ids []string) {
				require.Contains(t, ids, "import:"+run+":run")
				require.Empty(t, withPrefix(ids, "import:"+run+":task:"), "no task")
				require.Empty(t, withPrefix(ids, "import:"+run+":seq:"), "no task line")
			}
			noTask(ids)
			sink, reported := followPasses(t, root, 2)
			require.Equal(t, []string{c.reason}, reasonsFor(reported, "state/runs/"+run+"/tasks.json"))
			got, _ := sink.imported()
			noTask(got)
		})
	}
}

// TestFollowerStartingWhileTasksCannotBeReadHoldsTheTaskLines: a follower starting on a run whose tasks.json is there
// but cannot be read (a failing disk, a full descriptor table) has read no task, and took the run for one without
// tasks: every line naming a task that it read until tasks.json could be read was skipped for good, as naming no task
// of tasks.json, where the one-shot import of the same files, which does not import a run it cannot read whole,
// records it once it can. A line naming a task the tasks read lack waits, with the lines after it, while tasks.json
// cannot be read, and is read once it can. So does a steering line of a task the tasks read lack, which is skipped
// (TestASteeringFileOfNoTaskIsSkipped): every steer of the run was lost; and so does a line of a task's inbox
// (TestATaskMailboxOfNoTaskIsSkipped).
func TestFollowerStartingWhileTasksCannotBeReadHoldsTheTaskLines(t *testing.T) {
	for what, write := range map[string]func(r *picrewtest.Run) error{
		"an event line": func(r *picrewtest.Run) error {
			_, err := r.Event("task.started", "01_plan", nil)
			return err
		},
		"a steering line": func(r *picrewtest.Run) error { return r.Steer("01_plan", "look again") },
		"a task inbox line": func(r *picrewtest.Run) error {
			_, err := r.Message("01_plan", "look again")
			return err
		},
	} {
		for _, how := range []readFailure{openFails, readFails} {
			t.Run(what+", "+string(how), func(t *testing.T) {
				root, r := runningPlanRun(t)
				require.NoError(t, write(r))
				sink := newMemSink()
				requireCopyOnceTasksCanBeRead(t, root.Dir, sink, how, func() (func(), *[]Skipped) {
					_, pass, reported := stepFollower(t, root.Dir, sink)
					return pass, reported
				})
			})
		}
	}
}

// TestFollowerRestartedWhileTasksCannotBeReadKeepsTheStatesOfTaskMessages: a follower restarted on a run whose
// tasks.json is there but cannot be read read its files up to their checkpoints as a run without tasks: a line of a
// task's inbox was skipped as being in the inbox of no task of tasks.json (its write dropped as recorded, and the
// message unknown to the follower), so a state delivery.json gave the message since (an acknowledgement) was never
// recorded, where the one-shot import of the same files records it. The run is primed once tasks.json can be read.
func TestFollowerRestartedWhileTasksCannotBeReadKeepsTheStatesOfTaskMessages(t *testing.T) {
	for _, how := range []readFailure{openFails, readFails} {
		t.Run(string(how), func(t *testing.T) {
			root, r := runningPlanRun(t)
			id, err := r.Message("01_plan", "look again")
			require.NoError(t, err)
			sink := newMemSink()
			_, pass, _ := stepFollower(t, root.Dir, sink)
			pass()
			pass()
			ids, _ := sink.imported()
			require.Contains(t, ids, "import:"+runA+":msg:"+id)

			require.NoError(t, r.Deliver(id, "acknowledged"))
			requireCopyOnceTasksCanBeRead(t, root.Dir, sink, how, func() (func(), *[]Skipped) {
				_, pass, reported := restartedFollower(t, root.Dir, sink)
				return pass, reported
			})
		})
	}
}

// requireCopyOnceTasksCanBeRead starts a follower over root and sink (start) while the tasks.json of runA cannot be
// read (how), makes three passes, which report it, then two once it can be read, and requires sink to hold the copy
// a one-shot import of the files makes.
func requireCopyOnceTasksCanBeRead(t *testing.T, root string, sink *memSink, how readFailure,
	start func() (pass func(), reported *[]Skipped)) {
	t.Helper()
	heal := failReads(t, root, how, syscall.EIO, "state/runs/"+runA+"/tasks.json")
	pass, reported := start()
	for range 3 {
		pass()
	}
	require.Contains(t, reasonsFor(*reported, "state/runs/"+runA+"/tasks.json"), "tasks unreadable: "+
		syscall.EIO.Error())
	heal()
	pass()
	pass()
	requireCopy(t, root, sink, copyOf{live: true})
}
