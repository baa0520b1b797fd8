package picrew

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

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
	ignored := "artifactsRoot names another directory than the run's own: ignored, steering files are read from artifacts/" + runA
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
		{name: "another run's, through the run's own", own: true, reported: map[string][]string{manifestRel: {ignored}},
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
				require.Len(t, withPrefix(got, "import:"+runB+":steer:01_secret:"), 1, "%s: run B's steer is B's", way)
			}
			for way, skipped := range map[string][]Skipped{"import": skipped, "follow": reported} {
				for _, rel := range []string{manifestRel, steeringRel} {
					require.Equal(t, tc.reported[rel], reasonsFor(skipped, rel), "%s: reported for %s", way, rel)
				}
			}
		})
	}
}
