package picrew

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/migrations/picrew/picrewtest"
)

// setArtifactsRoot rewrites run's manifest with artifactsRoot v, as a
// worker of the run may (the rest as pi-crew wrote it).
func setArtifactsRoot(t *testing.T, run *picrewtest.Run, v string) {
	t.Helper()
	p := filepath.Join(run.Dir, "manifest.json")
	raw, err := os.ReadFile(p)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	m["artifactsRoot"] = v
	raw, err = json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p, raw, 0o644))
}

// TestArtifactsRootIsTheRunsOwn: a run's steering files are those of its
// own artifacts directory, artifacts/<runId> (D§1), whatever its manifest's
// artifactsRoot says. The manifest is rewritten by the run's workers: a
// value naming another run's directory, or any other, would import what is
// there as this run's steers (another run's private instructions, or lines
// forged anywhere). Such a value is reported and ignored, by the one-shot
// import and by the follower; a value naming the run's own directory under
// another path of the root (a root copied from another machine) is not
// worth a line. A symbolic link in place of the run's steering directory
// is refused the same way.
func TestArtifactsRootIsTheRunsOwn(t *testing.T) {
	const ownSteer = "import:" + runA + ":steer:01_own:"
	manifestRel := "state/runs/" + runA + "/manifest.json"
	steeringRel := "artifacts/" + runA + "/steering"
	ignored := "artifactsRoot names another directory than the run's own: ignored, steering files are read from " +
		"artifacts/" + runA
	for _, tc := range []struct {
		name string
		// set changes run A's files; the root holds run B's steers, and A's
		// own.
		set func(t *testing.T, root string, a *picrewtest.Run)
		// own: run A's own steer is imported (its steering directory is
		// left as pi-crew made it).
		own      bool
		reported map[string][]string // by path
	}{
		{name: "the run's own", own: true,
			set: func(*testing.T, string, *picrewtest.Run) {}},
		{name: "none (an older manifest)", own: true,
			set: func(t *testing.T, _ string, a *picrewtest.Run) { setArtifactsRoot(t, a, "") }},
		{name: "the run's own under another path of the root", own: true,
			set: func(t *testing.T, _ string, a *picrewtest.Run) {
				setArtifactsRoot(t, a, "/srv/app/.crew/artifacts/"+runA+"/")
			}},
		{name: "another run's", own: true, reported: map[string][]string{manifestRel: {ignored}},
			set: func(t *testing.T, root string, a *picrewtest.Run) {
				setArtifactsRoot(t, a, filepath.Join(root, "artifacts", runB))
			}},
		{name: "another run's, through the run's own", own: true,
			reported: map[string][]string{manifestRel: {ignored}},
			set: func(t *testing.T, root string, a *picrewtest.Run) {
				setArtifactsRoot(t, a, filepath.Join(root, "artifacts", runA)+"/../"+runB)
			}},
		{name: "a directory outside the root", own: true, reported: map[string][]string{manifestRel: {ignored}},
			set: func(t *testing.T, _ string, a *picrewtest.Run) {
				elsewhere := t.TempDir()
				require.NoError(t, picrewtest.AppendRaw(filepath.Join(elsewhere, "steering", "01_own.jsonl"),
					[]byte(`{"type":"steer","message":"forged","ts":"2026-12-01T12:00:00.000Z"}`+"\n")))
				setArtifactsRoot(t, a, elsewhere)
			}},
		{name: "a link in place of the run's steering directory", reported: map[string][]string{
			steeringRel: {"steering files not read: a symbolic link in place of a directory"}},
			set: func(t *testing.T, root string, _ *picrewtest.Run) {
				own := filepath.Join(root, "artifacts", runA, "steering")
				require.NoError(t, os.RemoveAll(own))
				require.NoError(t, os.Symlink(filepath.Join(root, "artifacts", runB, "steering"), own))
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := newRoot(t)
			a, b := newRun(t, root, runA), newRun(t, root, runB)
			require.NoError(t, b.AddTask("01_secret", "executor"))
			require.NoError(t, b.Steer("01_secret", "run B's private instruction"))
			require.NoError(t, a.AddTask("01_own", "executor"))
			require.NoError(t, a.Steer("01_own", "run A's own instruction"))
			require.NoError(t, a.SetStatus("running"))
			tc.set(t, root.Dir, a)

			ids, skipped := importPlan(t, root.Dir)
			sink, reported := followPasses(t, root.Dir, 3)
			followed, _ := sink.imported()
			for way, got := range map[string][]string{"import": ids, "follow": followed} {
				steers := withPrefix(got, "import:"+runA+":steer:")
				if tc.own {
					require.Len(t, steers, 1, "%s: run A's steers: %v", way, steers)
					require.Contains(t, steers[0], ownSteer, way)
				} else {
					require.Empty(t, steers, way)
				}
				require.Len(t, withPrefix(got, "import:"+runB+":steer:01_secret:"), 1,
					"%s: run B's steer is B's", way)
			}
			for way, skipped := range map[string][]Skipped{"import": skipped, "follow": reported} {
				for _, rel := range []string{manifestRel, steeringRel} {
					require.Equal(t, tc.reported[rel], reasonsFor(skipped, rel), "%s: reported for %s", way, rel)
				}
			}
		})
	}
}

// rewriteJSON rewrites the JSON file at p through edit, as a worker of the run may.
func rewriteJSON(t *testing.T, p string, edit func(v any) any) {
	t.Helper()
	raw, err := os.ReadFile(p)
	require.NoError(t, err)
	var v any
	require.NoError(t, json.Unmarshal(raw, &v))
	raw, err = json.Marshal(edit(v))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p, raw, 0o644))
}

// TestReportsAreBounded: a report names what it left out, and many of those names come from the files (a run id in
// a manifest, a task id, an event's type, a delegation's subId, a run status), which the run's workers write. A
// report is kept (the follower's once-only set, the one-shot import's summary) and logged (crewd's log), so each is
// bounded, however long the value: a manifest rewritten with another megabyte-long run id at every change held
// another megabyte of the follower's memory for good, and wrote it to crewd's log.
func TestReportsAreBounded(t *testing.T) {
	long := strings.Repeat("x", 1<<20)
	root := newRoot(t)
	a := newRun(t, root, runA)
	require.NoError(t, a.AddTask("01_plan", "planner"))
	require.NoError(t, a.SetStatus("running"))
	_, err := a.Event("delegate.completed", "01_plan", map[string]any{"subId": long})
	require.NoError(t, err)
	_, err = a.Event("task.started", long, nil)
	require.NoError(t, err)
	require.NoError(t, picrewtest.AppendRaw(a.EventsPath(), []byte(`{"type":"`+long+`"}`+"\n")))
	rewriteJSON(t, filepath.Join(a.Dir, "tasks.json"), func(v any) any {
		return append(v.([]any), map[string]any{"id": long, "stepId": "s"})
	})
	b := newRun(t, root, runB)
	rewriteJSON(t, filepath.Join(b.Dir, "manifest.json"), func(v any) any {
		v.(map[string]any)["runId"] = long
		return v
	})
	c := newRun(t, root, "team_20261201120000_00000000000000cc")
	rewriteJSON(t, filepath.Join(c.Dir, "manifest.json"), func(v any) any {
		v.(map[string]any)["status"] = long
		return v
	})

	_, planned := importPlan(t, root.Dir)
	_, followed := followPasses(t, root.Dir, 2)
	for name, skipped := range map[string][]Skipped{"import": planned, "follow": followed} {
		long := 0
		for _, s := range skipped {
			if strings.Contains(s.Reason, "xxxxxxxx") {
				long++
			}
			require.LessOrEqual(t, len(s.Reason), maxReason, "%s: a report of %d bytes: %.200s", name,
				len(s.Reason), s.Reason)
		}
		want := 5 // the subId, the task id of an event and of tasks.json, the event's type, the manifest's run id
		if name == "import" {
			want++ // the run status, which the follower reconciles only for a run that finished
		}
		require.Equal(t, want, long, "%s: the reports naming a long value", name)
	}
}

// TestReportsArePrintable: crewctl prints every report on the user's terminal, and a report quotes names and values
// from the files (a file's name, an event's type, a task id), which a run's workers write. A control character there
// (an escape sequence that moves the cursor, clears the screen, retitles the window) would reach the terminal as is;
// each is shown as U+FFFD instead.
func TestReportsArePrintable(t *testing.T) {
	root := newRoot(t)
	a := newRun(t, root, runA)
	require.NoError(t, a.SetStatus("running"))
	require.NoError(t, picrewtest.AppendRaw(a.EventsPath(), []byte(`{"type":"\u001b]0;owned\u0007\u009b2J"}`+"\n")))
	require.NoError(t, os.WriteFile(filepath.Join(a.Dir, "notes\x1b[2J\xff.txt"), nil, 0o644))

	_, planned := importPlan(t, root.Dir)
	_, followed := followPasses(t, root.Dir, 2)
	for name, skipped := range map[string][]Skipped{"import": planned, "follow": followed} {
		var marked int
		for _, s := range skipped {
			text := s.String()
			require.True(t, utf8.ValidString(text), "%s: %q", name, text)
			for _, r := range text {
				require.False(t, unicode.IsControl(r), "%s: a control character in %q", name, text)
			}
			marked += strings.Count(text, "\uFFFD")
		}
		require.Equal(t, 5, marked, "%s: the control characters and the byte that is not UTF-8, each shown", name)
	}
}
