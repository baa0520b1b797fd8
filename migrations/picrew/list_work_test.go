package picrew

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAPassListsARunsFilesInLinearWork: each pass lists every file a run follows (followedFiles), up to maxRunFiles
// of each kind, 6,145 in all, and looked for each tail among the files listed, and for each new event-log archive
// among every tail (a rotation's renamed file): some 20 million steps a listing (40 million the first pass), every
// second, for one run whose worker made files. It takes a step a file and a tail now (listWork), and lists the same
// files in the same order, a rotated file's archive taking its tail, a file removed reported.
func TestAPassListsARunsFilesInLinearWork(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"state/runs/" + runA + "/manifest.json": manifestOf(runA, "running"),
		"state/runs/" + runA + "/tasks.json":    `[{"id":"t00000","stepId":"s","status":"running"}]`,
		"state/runs/" + runA + "/events.jsonl": eventLine(1, "task.started", "t00000", `{}`) +
			eventLine(2, "task.progress", "t00000", `{}`),
	}
	archive := func(i int) string {
		return fmt.Sprintf("state/runs/%s/events.jsonl.2026-10-02T08-%05d.archive.jsonl", runA, i)
	}
	for i := range maxRunFiles {
		files[archive(i)] = ""
		files[fmt.Sprintf("state/runs/%s/mailbox/tasks/t%05d/inbox.jsonl", runA, i)] = ""
		files[fmt.Sprintf("artifacts/%s/steering/t%05d.jsonl", runA, i)] = ""
	}
	writeFiles(t, root, files)
	const followed = 3*maxRunFiles + 1
	fl, pass, reported := stepFollower(t, root, newMemSink())
	step := func(why string) {
		before := fl.listWork
		pass()
		// NB: a pass lists the run's files once, the first twice (prime, then syncRun); a listing takes a step a
		// file and a tail, and one a tail at its first new event-log file.
		require.LessOrEqual(t, fl.listWork-before, uint64(2*3*followed), "%s: steps of a pass", why)
	}
	step("the first pass")
	step("a pass of nothing new")
	r := fl.runs[runA]
	require.Len(t, r.tails, followed)

	// A rotation renames the live file to an archive (which takes its tail), a file goes away: listed in order.
	live := filepath.Join(root, "state/runs", runA, "events.jsonl")
	rotated := filepath.Join(root, archive(maxRunFiles-1)) + ".b.archive.jsonl"
	require.NoError(t, os.Rename(live, rotated))
	require.NoError(t, os.WriteFile(live, nil, 0o600))
	require.NoError(t, os.Remove(filepath.Join(root, archive(0))))
	lines := fl.Stats().Lines
	require.Equal(t, uint64(2), lines)
	step("a pass after a rotation")
	require.Equal(t, lines, fl.Stats().Lines, "the archive took the live file's tail: its lines not read again")
	require.Equal(t, int64(2), r.tails[rotated].lines)
	listed, complete := fl.listFiles(r, false)
	require.True(t, complete)
	paths := make([]string, len(listed))
	for i, l := range listed {
		paths[i] = l.path
	}
	require.Equal(t, paths, fl.followedFiles(r), "the files listed, in order")
	require.True(t, r.tails[filepath.Join(root, archive(0))].gone)
	require.Equal(t, []string{"file removed: what was imported of it stays"}, reasonsFor(*reported, archive(0)))
}
