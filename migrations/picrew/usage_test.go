package picrew

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

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
		"tasks.json": `[{"id":"01_build","stepId":"build","role":"executor","agent":"executor","status":"completed",` +
			`"startedAt":1790928001000,"finishedAt":` + strconv.FormatInt(finishedAt, 10) + `,"usage":` + usage + `}]`,
		"events.jsonl": `{"time":1790928001000,"type":"task.started","taskId":"01_build","metadata":{"seq":1}}` + "\n" +
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
		require.Equal(t, projections.Usage{Input: 300, Output: 70, CacheRead: 9, CacheWrite: 20, Cost: 1.25, Turns: 5}, u)
		require.Equal(t, int64(300+70+20), used, "the run's budget use is its task's last usage")
	}
	requireFirst := func(t *testing.T, eng *commands.Engine) {
		t.Helper()
		u, used := usageOf(eng)
		require.Equal(t, projections.Usage{Input: 100, Output: 50, CacheRead: 7, CacheWrite: 10, Cost: 0.5, Turns: 2}, u)
		require.Equal(t, int64(100+50+10), used, "the run's budget use is its task's last usage")
	}
	t.Run("follower", func(t *testing.T) {
		root := t.TempDir()
		writeUsageRun(t, root, first, 1790928050000)
		l := openFuzzStore(t)
		defer l.Close()
		eng, err := commands.Open(l, commands.Options{Clock: clock, ExpiryInterval: -1, SnapshotEvery: -1})
		require.NoError(t, err)
		defer eng.Close()
		fl := NewFollower(root, engineSink{eng}, &FollowOptions{SettleAfter: time.Nanosecond, CheckpointEvery: time.Nanosecond})
		fl.cks = map[string]events.ImportCheckpoint{} // what Run loads first: no checkpoint yet
		passes := func() {
			for range 3 {
				fl.pass(t.Context(), filepath.Join(root, "state", "runs"), true, nil)
			}
			require.Zero(t, fl.Stats().Pending)
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
