package picrew

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestARunsFilesOfAKindAreBounded: a run's workers can make any number of event-log archives, mailbox files (a task
// mailbox directory each) and steering files, and the follower followed each: a tail, a look at it every pass, a
// checkpoint kept for good. Of each kind, the first maxRunFiles in the order they are read are read, by the one-shot
// import and the follower alike; the others are not, and that is reported once.
func TestARunsFilesOfAKindAreBounded(t *testing.T) {
	for name, c := range map[string]struct {
		file func(i int) string // the i-th file of the kind, relative to the root
		dir  string             // the directory reported
	}{
		"event-log archives": {func(i int) string {
			return fmt.Sprintf("state/runs/%s/events.jsonl.2026-10-02T08-%05d.archive.jsonl", runA, i)
		}, "state/runs/" + runA},
		"mailbox files": {func(i int) string {
			return fmt.Sprintf("state/runs/%s/mailbox/tasks/t%05d/inbox.jsonl", runA, i)
		}, "state/runs/" + runA + "/mailbox"},
		"steering files": {func(i int) string {
			return fmt.Sprintf("artifacts/%s/steering/t%05d.jsonl", runA, i)
		}, "artifacts/" + runA + "/steering"},
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			files := map[string]string{
				"state/runs/" + runA + "/manifest.json": manifestOf(runA, "running"),
				"state/runs/" + runA + "/tasks.json":    `[{"id":"t00000","stepId":"s","status":"running"}]`,
				"state/runs/" + runA + "/events.jsonl":  "",
			}
			for i := range maxRunFiles + 2 {
				files[c.file(i)] = ""
			}
			writeFiles(t, root, files)
			want := fmt.Sprintf("more than %d %s: those past the first %[1]d, in the order they are read, are not "+
				"read", maxRunFiles, name)

			s := &source{root: root}
			require.NotNil(t, s.readRun(runA, s.runDir(runA)))
			require.Equal(t, []string{want}, reasonsFor(s.skipped, c.dir), "the import")

			fl, pass, reported := stepFollower(t, root, newMemSink())
			pass()
			pass()
			require.Equal(t, []string{want}, reasonsFor(*reported, c.dir), "the follower, once")
			// NB: events.jsonl and the files of the kind kept.
			require.Equal(t, maxRunFiles+1, len(fl.runs[runA].tails))
		})
	}
}
