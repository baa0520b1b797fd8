package picrew

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

const replanRun = "run_replan"

// writeReplanRun writes a finished run whose task 01_build reserved 100 tokens for its delegation gc-1 (seq 2), as
// its tasks.json allocation says, and returns the path of its events.jsonl.
func writeReplanRun(t *testing.T, dir string) string {
	t.Helper()
	run := "state/runs/" + replanRun
	files := map[string]string{
		run + "/manifest.json": `{"runId":"` + replanRun + `","team":"core","workflow":"implement","goal":"g",` +
			`"status":"completed","createdAt":1790928000000,"updatedAt":1790928060000,"cwd":"/srv/app"}`,
		run + "/tasks.json": `[` +
			`{"id":"01_build","stepId":"build","role":"executor","agent":"executor","status":"completed",` +
			`"startedAt":1790928001000,"finishedAt":1790928050000,"allocation":{"tokensGranted":1000,` +
			`"tokensSpent":100}},{"id":"gc-1","role":"explorer","agent":"delegate","status":"completed","depth":2,` +
			`"startedAt":1790928002000,"finishedAt":1790928040000}]`,
		run + "/events.jsonl": strings.Join([]string{
			`{"time":1790928001000,"type":"task.started","taskId":"01_build","metadata":{"seq":1}}`,
			`{"time":1790928002000,"type":"delegate.admitted","taskId":"01_build","data":{"subId":"gc-1",` +
				`"reservedTokens":100},"metadata":{"seq":2}}`, `{"time":1790928040000,"type":"delegate.completed",` +
				`"taskId":"01_build","data":{"subId":"gc-1","ok":true},"metadata":{"seq":3}}`,
			`{"time":1790928050000,"type":"task.completed","taskId":"01_build","metadata":{"seq":4}}`,
			`{"time":1790928060000,"type":"run.completed","metadata":{"seq":5}}`,
		}, "\n") + "\n",
	}
	for p, b := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(b), 0o644))
	}
	return filepath.Join(dir, filepath.FromSlash(run+"/events.jsonl"))
}

// compactTo rewrites the file at p under a new inode with its last keep lines, as pi-crew's compaction does.
func compactTo(t *testing.T, p string, keep int) {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	lines := strings.SplitAfter(strings.TrimSuffix(string(b), "\n"), "\n")
	kept := strings.Join(lines[len(lines)-keep:], "")
	if !strings.HasSuffix(kept, "\n") {
		kept += "\n"
	}
	require.NoError(t, os.WriteFile(p+".tmp", []byte(kept), 0o644))
	require.NoError(t, os.Rename(p+".tmp", p))
}

// spentOf is task taskID's tokensSpent in the state l's log folds to.
func spentOf(t *testing.T, l *eventlog.Log, taskID string) int64 {
	t.Helper()
	eng, err := commands.Open(l, commands.Options{ExpiryInterval: -1, SnapshotEvery: -1})
	require.NoError(t, err)
	defer eng.Close()
	var a projections.Allocation
	eng.Read(func(s *projections.State) { a, _ = s.Allocation(replanRun, taskID) })
	return a.TokensSpent
}

// TestReplanAfterCompactionCountsSpendOnce: a follower restarted after pi-crew compacted events.jsonl, or the
// one-shot import run again over the compacted file, plans the run from what the file still holds, which lacks the
// admission that reserved the task's spend; the reconcile that brings the task's allocation to what tasks.json says
// must count what the store holds already, not reserve the compacted admission's tokens a second time.
func TestReplanAfterCompactionCountsSpendOnce(t *testing.T) {
	clock := func() time.Time { return time.UnixMilli(timesClockMs) }
	t.Run("follower", func(t *testing.T) {
		root := t.TempDir()
		evs := writeReplanRun(t, root)
		l := openFuzzStore(t)
		defer l.Close()
		eng, err := commands.Open(l, commands.Options{Clock: clock, ExpiryInterval: -1, SnapshotEvery: -1})
		require.NoError(t, err)
		follow := func() {
			fl := NewFollower(root, engineSink{eng},
				&FollowOptions{SettleAfter: time.Nanosecond, CheckpointEvery: time.Nanosecond})
			// a checkpoint that no longer matches: the file is read from its start
			fl.cks = map[string]events.ImportCheckpoint{}
			for range 3 {
				fl.pass(t.Context(), filepath.Join(root, "state", "runs"), true, nil)
			}
			require.Zero(t, fl.Stats().Pending)
		}
		follow()
		var before projections.Allocation
		eng.Read(func(s *projections.State) { before, _ = s.Allocation(replanRun, "01_build") })
		require.Equal(t, int64(100), before.TokensSpent)
		compactTo(t, evs, 2)
		follow()
		require.NoError(t, eng.Close())
		require.Equal(t, int64(100), spentOf(t, l, "01_build"),
			"the compacted admission's reservation is counted once")
	})
	t.Run("one-shot", func(t *testing.T) {
		root := t.TempDir()
		evs := writeReplanRun(t, root)
		l := openFuzzStore(t)
		defer l.Close()
		_, err := Import(l, root, &Options{Clock: clock})
		require.NoError(t, err)
		compactTo(t, evs, 2)
		_, err = Import(l, root, &Options{Clock: clock})
		require.NoError(t, err)
		require.Equal(t, int64(100), spentOf(t, l, "01_build"),
			"the compacted admission's reservation is counted once")
	})
}

const usageRun = "run_usage"

// writeUsageRun writes a finished run whose one task's tasks.json record shows usage, the counters and cost given, of
// the attempt that finished at finishedAt (unix ms).
func writeUsageRun(t *testing.T, dir, usage string, finishedAt int64) {
	t.Helper()
	run := filepath.Join(dir, "state", "runs", usageRun)
	require.NoError(t, os.MkdirAll(run, 0o755))
	files := map[string]string{
		"manifest.json": `{"runId":"` + usageRun + `","team":"core","workflow":"implement","goal":"g",` +
			`"status":"completed","createdAt":1790928000000,"updatedAt":1790928060000,"cwd":"/srv/app"}`,
		"tasks.json": `[{"id":"01_build","stepId":"build","role":"executor","agent":"executor",` +
			`"status":"completed","startedAt":1790928001000,"finishedAt":` + strconv.FormatInt(finishedAt, 10) +
			`,"usage":` + usage + `}]`, "events.jsonl": `{"time":1790928001000,"type":"task.started",` +
			`"taskId":"01_build","metadata":{"seq":1}}` + "\n" +
			`{"time":1790928050000,"type":"task.completed","taskId":"01_build","metadata":{"seq":2}}` + "\n" +
			`{"time":1790928060000,"type":"run.completed","metadata":{"seq":3}}` + "\n",
	}
	for name, b := range files {
		// NB: a new inode, as pi-crew's atomic rewrite, so a follower reads it again.
		p := filepath.Join(run, name)
		require.NoError(t, os.WriteFile(p+".tmp", []byte(b), 0o644))
		require.NoError(t, os.Rename(p+".tmp", p))
	}
}

// TestImportFollowsAChangedUsage: pi-crew writes a task's usage into tasks.json at the end of each attempt, so a
// retried task's record shows its new attempt's usage. Written under one id per task, the second usage was answered
// as a write already recorded: the task and its run's budget use kept the first attempt's usage for good. A usage
// that changes is a new write; one read again is not.
func TestImportFollowsAChangedUsage(t *testing.T) {
	clock := func() time.Time { return time.UnixMilli(timesClockMs) }
	const first = `{"input":100,"output":50,"cacheRead":7,"cacheWrite":10,"cost":0.5,"turns":2}`
	const second = `{"input":300,"output":70,"cacheRead":9,"cacheWrite":20,"cost":1.25,"turns":5}`
	usageOf := func(eng *commands.Engine) (u projections.Usage, budgetUsed int64) {
		eng.Read(func(s *projections.State) {
			task, _ := s.Task(usageRun, "01_build")
			run, _ := s.Run(usageRun)
			u, budgetUsed = task.Usage, run.BudgetUsed
		})
		return u, budgetUsed
	}
	requireSecond := func(t *testing.T, eng *commands.Engine) {
		t.Helper()
		u, used := usageOf(eng)
		require.Equal(t, projections.Usage{Input: 300, Output: 70, CacheRead: 9, CacheWrite: 20, Cost: 1.25,
			Turns: 5}, u)
		require.Equal(t, int64(300+70+20), used, "the run's budget use is its task's last usage")
	}
	requireFirst := func(t *testing.T, eng *commands.Engine) {
		t.Helper()
		u, used := usageOf(eng)
		require.Equal(t, projections.Usage{Input: 100, Output: 50, CacheRead: 7, CacheWrite: 10, Cost: 0.5,
			Turns: 2}, u)
		require.Equal(t, int64(100+50+10), used, "the run's budget use is its task's last usage")
	}
	t.Run("follower", func(t *testing.T) {
		root := t.TempDir()
		writeUsageRun(t, root, first, 1790928050000)
		l, eng, fl := followThroughEngine(t, root, clock, time.Nanosecond)
		passes := func() {
			fl.passes(t, dormantEvery+1) // a finished run at rest is looked at every dormantEvery passes
			require.Zero(t, fl.Stats().Refused)
		}
		passes()
		requireFirst(t, eng)

		writeUsageRun(t, root, second, 1790928050000)
		passes()
		requireSecond(t, eng)
		head, _ := l.Head()
		passes()
		again, _ := l.Head()
		require.Equal(t, head, again, "a usage read again records nothing")

		// A third attempt whose usage is the first's again, as a retried attempt that failed as the first did.
		writeUsageRun(t, root, first, 1790928090000)
		passes()
		requireFirst(t, eng)
	})
	t.Run("one-shot", func(t *testing.T) {
		root := t.TempDir()
		l := openFuzzStore(t)
		defer l.Close()
		attempt := func(usage string, finishedAt int64, check func(*testing.T, *commands.Engine)) {
			writeUsageRun(t, root, usage, finishedAt)
			_, err := Import(l, root, &Options{Clock: clock})
			require.NoError(t, err)
			eng, err := commands.Open(l, commands.Options{Clock: clock, ExpiryInterval: -1, SnapshotEvery: -1})
			require.NoError(t, err)
			defer eng.Close()
			check(t, eng)
		}
		attempt(first, 1790928050000, requireFirst)
		attempt(second, 1790928050000, requireSecond)
		attempt(first, 1790928090000, requireFirst)
	})
}

// TestFollowReconcilesARunThatFinishesAgain: a finished run is reconciled with its files, and only the reconcile
// records its tasks' usage. A run resumed (its manifest running again) while the follower held it (its checkpoints
// not due yet) that finished again in the same status was not reconciled again, as the follower kept the status it
// had reconciled it for: the new attempt's usage never reached the store. A run that leaves its end is reconciled
// again when it reaches one.
func TestFollowReconcilesARunThatFinishesAgain(t *testing.T) {
	clock := func() time.Time { return time.UnixMilli(timesClockMs) }
	root := t.TempDir()
	manifest := filepath.Join(root, "state", "runs", usageRun, "manifest.json")
	setStatus := func(status string) {
		b, err := os.ReadFile(manifest)
		require.NoError(t, err)
		b = regexp.MustCompile(`"status":"[a-z]+"`).ReplaceAll(b, []byte(`"status":"`+status+`"`))
		require.NoError(t, os.WriteFile(manifest+".tmp", b, 0o644))
		require.NoError(t, os.Rename(manifest+".tmp", manifest))
	}
	writeUsageRun(t, root, `{"input":100,"output":50}`, 1790928050000)
	setStatus("running")
	// NB: the checkpoints of the first pass are the last due within the test: the follower holds the run from then on
	// rather than letting it go once reconciled (as it does until a file's next checkpoint is due).
	_, eng, fl := followThroughEngine(t, root, clock, time.Hour)
	passes := func() {
		fl.passes(t, 3)
		require.NotNil(t, fl.runs[usageRun].p, "the follower holds the run")
	}
	budgetUsed := func() int64 {
		var used int64
		eng.Read(func(s *projections.State) {
			r, _ := s.Run(usageRun)
			used = r.BudgetUsed
		})
		return used
	}
	passes()
	setStatus("completed")
	passes()
	require.Equal(t, int64(150), budgetUsed())

	setStatus("running")
	passes()
	writeUsageRun(t, root, `{"input":300,"output":70}`, 1790928090000)
	passes()
	require.Equal(t, int64(370), budgetUsed(), "the second attempt's usage, reconciled when the run finished again")
}

// engineFollower is a follower of a crew root through an engine, passing in the test's goroutine.
type engineFollower struct {
	*Follower
	root string
}

// followThroughEngine opens a store and an engine on clock, and a follower of root through it that settles in a
// nanosecond and checkpoints a file at most every checkpointEvery, with no checkpoint yet; both are closed when the
// test ends.
func followThroughEngine(t *testing.T, root string, clock func() time.Time,
	checkpointEvery time.Duration) (*eventlog.Log, *commands.Engine, engineFollower) {
	t.Helper()
	l := openFuzzStore(t)
	t.Cleanup(func() { l.Close() })
	eng, err := commands.Open(l, commands.Options{Clock: clock, ExpiryInterval: -1, SnapshotEvery: -1})
	require.NoError(t, err)
	t.Cleanup(func() { eng.Close() })
	fl := NewFollower(root, engineSink{eng}, &FollowOptions{SettleAfter: time.Nanosecond,
		CheckpointEvery: checkpointEvery})
	fl.cks = map[string]events.ImportCheckpoint{} // what Run loads first: no checkpoint yet
	return l, eng, engineFollower{Follower: fl, root: root}
}

// passes makes n passes, as Run does at every poll without notifications, and requires every write answered.
func (fl engineFollower) passes(t *testing.T, n int) {
	t.Helper()
	for range n {
		fl.pass(t.Context(), filepath.Join(fl.root, "state", "runs"), true, nil)
	}
	require.Zero(t, fl.Stats().Pending)
}
