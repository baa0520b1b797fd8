package picrew

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/migrations/picrew/picrewtest"
)

// readFailure is where failReads makes a read of a file fail.
type readFailure string

const (
	// openFails: the open fails, as a full descriptor table (EMFILE) or a failing disk (EIO) makes it fail.
	openFails readFailure = "open fails"
	// readFails: the open succeeds and the read fails with EIO, as a failing disk makes it fail midway. What is
	// opened is /proc/self/mem, a regular file a read of which at offset 0 fails so.
	readFails readFailure = "read fails"
)

// failReads makes every read of a file, as how says, and every listing of a directory at one of the paths rels
// (relative to root) fail with err (EIO when the read fails), until heal is called or the test ends.
func failReads(t *testing.T, root string, how readFailure, err error, rels ...string) (heal func()) {
	t.Helper()
	failing := map[string]bool{}
	for _, rel := range rels {
		failing[filepath.Join(root, filepath.FromSlash(rel))] = true
	}
	open, list := openOS, readDir
	openOS = func(c *crewRoot, p string, flag int) (*os.File, error) {
		switch {
		case failing[p] && how == readFails:
			return os.OpenFile("/proc/self/mem", flag, 0)
		case failing[p]:
			return nil, &os.PathError{Op: "open", Path: p, Err: err}
		}
		return open(c, p, flag)
	}
	readDir = func(c *crewRoot, p string) ([]os.DirEntry, error) {
		if failing[p] {
			return nil, &os.PathError{Op: "open", Path: p, Err: err}
		}
		return list(c, p)
	}
	heal = func() { openOS, readDir = open, list }
	t.Cleanup(heal)
	return heal
}

// runDirs are the directories of run id (twoRuns) the import lists, relative to the root.
func runDirs(id string) []string {
	return []string{
		"state/runs/" + id,
		"state/runs/" + id + "/mailbox",
		"state/runs/" + id + "/mailbox/tasks",
		"state/runs/" + id + "/mailbox/tasks/01_plan",
		"artifacts/" + id + "/steering",
	}
}

// runReads are the files and directories of run id (twoRuns) the import reads, relative to the root, its manifest
// left out (the run is not imported without it).
func runReads(id string) []string { return append(slices.Clone(runFiles(id)[1:]), runDirs(id)...) }

// TestImportDoesNotTakeAnUnreadableFileForAbsent: a file or directory of a run that is there but cannot be read (a
// failing disk, a full descriptor table) was taken as absent, or a directory as empty, by the one-shot import, which
// then recorded the run without it: the run created, its tasks ended by the reconcile as tasks.json says, and no
// history (events.jsonl, a listing of the run's directory), no messages (a mailbox), the statuses of the mailbox
// lines for those delivery.json holds, or no tasks but those of the events (tasks.json). An import run again once it
// can be read appends the rest after the end states, out of order, or never (a task's end state is recorded once).
// Such a run is reported and not imported, nothing of it recorded; the other runs are, and an import once the file
// can be read imports the run whole.
func TestImportDoesNotTakeAnUnreadableFileForAbsent(t *testing.T) {
	for _, how := range []readFailure{openFails, readFails} {
		for _, rel := range runReads(runA) {
			if how == readFails && slices.Contains(runDirs(runA), rel) {
				continue // a listing fails one way
			}
			t.Run(string(how)+" at "+rel, func(t *testing.T) {
				root := twoRuns(t)
				whole, _ := importPlan(t, root)
				heal := failReads(t, root, how, syscall.EIO, rel)

				ids, skipped := importPlan(t, root)
				require.Empty(t, withPrefix(ids, "import:"+runA+":"),
					"nothing of run A is recorded while %s cannot be read", rel)
				require.Equal(t, withPrefix(whole, "import:"+runB+":"), withPrefix(ids, "import:"+runB+":"),
					"run B is imported whole")
				require.True(t, slices.ContainsFunc(reasonsFor(skipped, rel), func(r string) bool {
					return strings.HasSuffix(r, syscall.EIO.Error())
				}), "%s reported unreadable: %v", rel, reasonsFor(skipped, rel))
				require.Contains(t, reasonsFor(skipped, "state/runs/"+runA), runUnreadReason)

				l := openFuzzStore(t) // small and in memory
				defer l.Close()
				sum, err := Import(l, root, nil)
				require.NoError(t, err)
				require.Equal(t, []string{runA}, sum.Unread, "the import says run A is left to a later one")
				require.Equal(t, []string{runB}, runIDs(sum))

				heal()
				again, _ := importPlan(t, root)
				require.Equal(t, whole, again, "once it can be read, the run is imported whole")
				sum, err = Import(l, root, nil)
				require.NoError(t, err)
				require.Empty(t, sum.Unread)
				require.Equal(t, []string{runA, runB}, runIDs(sum))
			})
		}
	}
}

// TestFollowerDoesNotTakeAnUnreadableFileForAbsent: the follower took a file of a run it could not read for absent
// too. A run's directory or mailbox it could not list made every file in it "removed": each was reported so and its
// checkpoint recorded gone, which a follower started again reads as none (reading the file again from its start). A
// finished run whose tasks.json could not be read was reconciled with the tasks read before (a task still running
// stayed so) and let go, its manifest checkpointed reconciled: its files unchanged since, the run was never read
// again, and the tasks' end states never recorded. A pass that cannot read a file of a run reports it and records
// nothing from it (no removal, no reconcile); a later pass reads it, and the follower ends holding what a one-shot
// import of the files holds.
func TestFollowerDoesNotTakeAnUnreadableFileForAbsent(t *testing.T) {
	for _, rel := range runReads(runA) {
		t.Run(rel, func(t *testing.T) {
			root := newRoot(t)
			r := newRun(t, root, runA)
			event := func(typ, task string) func() error {
				return func() error { _, err := r.Event(typ, task, nil); return err }
			}
			message := func(body string) func() error {
				return func() error { _, err := r.Message("01_plan", body); return err }
			}
			runSteps(t, []func() error{
				func() error { return r.AddTask("01_plan", "planner") },
				func() error { return r.SetStatus("running") },
				event("run.running", ""),
				func() error { return r.SetTask("01_plan", "running") },
				event("task.started", "01_plan"),
				message("hello"),
				func() error { return r.Steer("01_plan", "go on") },
			})

			sink := newMemSink()
			_, pass, reported := stepFollower(t, root.Dir, sink)
			pass()
			pass()

			// The run ends while one of its files cannot be read.
			heal := failReads(t, root.Dir, openFails, syscall.EIO, rel)
			runSteps(t, []func() error{
				message("done?"),
				func() error { return r.Steer("01_plan", "wrap up") },
				func() error { return r.SetTask("01_plan", "completed") },
				event("task.completed", "01_plan"),
				func() error { return r.SetStatus("completed") },
				event("run.completed", ""),
			})
			for range 3 {
				pass()
			}
			for _, s := range *reported {
				require.NotContains(t, s.Reason, "removed", "%s is not removed", s.Path)
			}
			for _, c := range checkpointsOf(sink) {
				require.False(t, c.Gone, "%s checkpointed gone while %s cannot be read", c.Path, rel)
			}

			heal()
			for range 3 {
				pass()
			}
			requireCopy(t, root.Dir, sink, copyOf{})
		})
	}
}

// runningPlanRun is a crew root with run A, running (its run.running line written), and its one task, 01_plan.
func runningPlanRun(t *testing.T) (*picrewtest.Root, *picrewtest.Run) {
	t.Helper()
	root := newRoot(t)
	r := newRun(t, root, runA)
	runSteps(t, []func() error{
		func() error { return r.AddTask("01_plan", "planner") },
		func() error { return r.SetStatus("running") },
		func() error { _, err := r.Event("run.running", "", nil); return err },
	})
	return root, r
}

// runIDs are the runs an import imported, in its order.
func runIDs(sum Summary) []string {
	var out []string
	for _, r := range sum.Runs {
		out = append(out, r.RunID)
	}
	return out
}

// checkpointsOf are the checkpoints the sink recorded, in order.
func checkpointsOf(m *memSink) []events.ImportCheckpoint {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []events.ImportCheckpoint
	for _, w := range m.appended {
		if w.RunID == events.ImportStream {
			out = append(out, *w.Items[0].Payload.(*events.ImportCheckpoint))
		}
	}
	return out
}

// TestFollowerDoesNotTakeAFailedReadForARewrite: before reading what a file gained, the follower reads back the
// line it read last, to tell a file rewritten in place. A read back that failed (a failing disk) was taken for a
// rewrite: the file was reported "rewritten in place" and read again from its start. It is not a rewrite: the file
// is read on from where it was once it can be read.
func TestFollowerDoesNotTakeAFailedReadForARewrite(t *testing.T) {
	root, r := runningPlanRun(t)
	sink := newMemSink()
	fl, pass, reported := stepFollower(t, root.Dir, sink)
	pass()
	read := fl.Stats().Lines

	heal := failReads(t, root.Dir, readFails, syscall.EIO, "state/runs/"+runA+"/events.jsonl")
	_, err := r.Event("task.progress", "01_plan", map[string]any{"step": 1})
	require.NoError(t, err)
	pass()
	heal()
	pass()
	for _, s := range *reported {
		require.NotContains(t, s.Reason, "rewritten", "%s: a read that failed is not a rewrite", s.Path)
	}
	require.Equal(t, read+1, fl.Stats().Lines, "the line the file gained is read, and only it")
	requireCopy(t, root.Dir, sink, copyOf{live: true})
}
