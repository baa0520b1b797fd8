package picrew

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTheStrayEntriesOfARunsDirectoriesAreReportedBounded: a run's workers can make any number of entries in its
// directories that are none of its files, and each was reported under its own path, by the one-shot import and at
// every pass of the follower: a million of them made a million reports, and the follower's report-once set
// (maxReported) was filled, cleared and filled again. Of each kind of directory (the run's own, its mailbox
// directories, its steering directory) the first maxStrayReports are reported, each under its path, and the others
// counted, their count reported under the kind's directory, by the one-shot import and the follower alike.
func TestTheStrayEntriesOfARunsDirectoriesAreReportedBounded(t *testing.T) {
	const strays = maxStrayReports + 50
	run := "state/runs/" + runA
	for name, c := range map[string]struct {
		entry   func(i int) string // the i-th stray entry, relative to the root
		dir     string             // the directory of the kind, where the count is reported
		summary string
	}{
		"in the run's directory": {func(i int) string { return fmt.Sprintf("%s/junk%05d", run, i) }, run,
			"the run's directory"},
		"in the mailbox directory": {func(i int) string { return fmt.Sprintf("%s/mailbox/junk%05d", run, i) },
			run + "/mailbox", "the run's mailbox directories"},
		"in the task mailboxes' directory": {func(i int) string {
			return fmt.Sprintf("%s/mailbox/tasks/junk%05d", run, i)
		}, run + "/mailbox", "the run's mailbox directories"},
		"in task mailboxes": {func(i int) string {
			return fmt.Sprintf("%s/mailbox/tasks/t%05d/junk%05d", run, i%2, i)
		}, run + "/mailbox", "the run's mailbox directories"},
		"in the steering directory": {func(i int) string {
			return fmt.Sprintf("artifacts/%s/steering/junk%05d", runA, i)
		}, "artifacts/" + runA + "/steering", "the run's steering directory"},
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			files := map[string]string{
				run + "/manifest.json": manifestOf(runA, "running"),
				run + "/tasks.json":    `[{"id":"t00000","stepId":"s","status":"running"}]`,
				run + "/events.jsonl":  "",
			}
			for i := range strays {
				files[c.entry(i)] = ""
			}
			writeFiles(t, root, files)
			want := fmt.Sprintf("%d more entries of %s that are none of its files: not imported, not reported "+
				"one by one", strays-maxStrayReports, c.summary)

			s := &source{root: root}
			require.NotNil(t, s.readRun(runA, s.runDir(runA)))
			require.Equal(t, maxStrayReports+1, len(under(s.skipped, c.dir)), "the import")
			require.Equal(t, []string{want}, reasonsFor(s.skipped, c.dir), "the import")

			_, pass, reported := stepFollower(t, root, newMemSink())
			pass()
			pass()
			require.Equal(t, maxStrayReports+1, len(under(*reported, c.dir)), "the follower, once")
			require.Equal(t, []string{want}, reasonsFor(*reported, c.dir), "the follower")
		})
	}
}

// under are the reports of paths in the directory rel, or of rel.
func under(skipped []Skipped, rel string) []Skipped {
	var out []Skipped
	for _, s := range skipped {
		if s.Path == rel || strings.HasPrefix(s.Path, rel+"/") {
			out = append(out, s)
		}
	}
	return out
}
