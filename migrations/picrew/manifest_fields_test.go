package picrew

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAManifestFieldOfAnotherTypeCostsTheFieldOnly: a manifest's text field, budgetWarning, budgetAbort or
// budgetUnlimited of another JSON type than pi-crew writes (a run's workers rewrite the manifest) made the whole
// manifest fail to decode: the one-shot import did not import the run, and a follower kept the manifest read before
// (its status, so a run that ended was never reconciled). Such a field is taken as absent and reported as written
// now, as a budgetTotal that is no integer is, and the rest of the manifest is read.
func TestAManifestFieldOfAnotherTypeCostsTheFieldOnly(t *testing.T) {
	texts := []string{"5", "true", `{"a":1}`, `["x"]`}
	for _, tc := range []struct {
		field, kind string
		written     []string
	}{
		{"runId", "string", texts},
		{"team", "string", texts},
		{"workflow", "string", texts},
		{"goal", "string", texts},
		{"status", "string", texts},
		{"cwd", "string", texts},
		{"artifactsRoot", "string", texts},
		{"budgetWarning", "finite number", []string{`"0.5"`, "true", `{"a":1}`, "[0.5]", "1e400"}},
		{"budgetAbort", "finite number", []string{`"0.5"`, "false", `{"a":1}`, "[0.5]", "-1e400"}},
		{"budgetUnlimited", "boolean", []string{`"true"`, "1", `{"a":1}`, "[true]"}},
	} {
		for _, written := range tc.written {
			name := tc.field + " " + written
			s := &source{root: t.TempDir()}
			m, err := s.parseManifest(runA, "manifest.json", []byte(`{"runId":"`+runA+`","goal":"the goal",`+
				`"status":"running","team":"t","workflow":"w","budgetWarning":0.5,"budgetAbort":0.9,`+
				`"budgetUnlimited":true,"`+tc.field+`":`+written+`}`))
			require.NoError(t, err, name)
			require.Equal(t, []string{tc.field + " " + written + " is not a " + tc.kind + ": taken as absent"},
				reasonsFor(s.skipped, "manifest.json"), name)
			want := manifest{RunID: runA, Goal: "the goal", Status: "running", Team: "t", Workflow: "w",
				BudgetWarning: new(0.5), BudgetAbort: new(0.9), BudgetUnlimited: true}
			for i := range reflect.TypeFor[manifest]().NumField() {
				if jsonName(reflect.TypeFor[manifest]().Field(i)) == tc.field {
					reflect.ValueOf(&want).Elem().Field(i).SetZero() // the field taken as absent
				}
			}
			require.Equal(t, want, m, name)
		}
	}
}

// TestAManifestFieldNamedTwiceIsTheLastOne: a field a manifest names twice is decoded as encoding/json decodes it
// (the last value stands, a null keeps the one before), one of another type costing itself only when it is the last.
func TestAManifestFieldNamedTwiceIsTheLastOne(t *testing.T) {
	for _, tc := range []struct {
		fields  string
		goal    string
		reasons []string
	}{
		{`"goal":5,"goal":"a"`, "a", nil},
		{`"goal":"a","goal":5`, "", []string{"goal 5 is not a string: taken as absent"}},
		{`"goal":"a","goal":null`, "a", nil},
		{`"goal":5,"goal":null`, "", []string{"goal 5 is not a string: taken as absent"}},
		{`"goal":5,"Goal":[1]`, "", []string{"goal [1] is not a string: taken as absent"}},
	} {
		s := &source{root: t.TempDir()}
		m, err := s.parseManifest(runA, "manifest.json", []byte(`{`+tc.fields+`}`))
		require.NoError(t, err, tc.fields)
		require.Equal(t, tc.goal, m.Goal, tc.fields)
		require.Equal(t, tc.reasons, reasonsFor(s.skipped, "manifest.json"), tc.fields)
	}
}

// TestAManifestOfFieldsOfTheirTypesDecodesAsBefore: a manifest whose fields are of the types pi-crew writes decodes
// as encoding/json decoded it into the manifest's fields, with no report.
func TestAManifestOfFieldsOfTheirTypesDecodesAsBefore(t *testing.T) {
	type plain manifest
	for _, b := range []string{
		`{}`, `null`,
		`{"runId":"` + runA + `","team":"t","workflow":"w","goal":"g","status":"completed","cwd":"/c",` +
			`"artifactsRoot":"/r/artifacts/` + runA + `","createdAt":"2026-10-02T08:00:00.000Z","updatedAt":1760000000000,` +
			`"budgetTotal":"12","budgetWarning":0.5,"budgetAbort":1,"budgetUnlimited":false,"other":[1]}`,
		`{"goal":null,"budgetWarning":null,"budgetUnlimited":null,"TEAM":"x","GOAL":"y"}`,
	} {
		var want plain
		require.NoError(t, json.Unmarshal([]byte(b), &want), b)
		s := &source{root: t.TempDir()}
		m, err := s.parseManifest(runA, "manifest.json", []byte(b))
		require.NoError(t, err, b)
		require.Equal(t, manifest(want), m, b)
		require.Empty(t, s.skipped, b)
	}
}

// TestAFollowerTakesAManifestWithAFieldOfAnotherType: a follower kept the manifest read before one with a field of
// another type (it did not decode), so the status of a run that ended was never read and the run never reconciled.
// It takes the rest of the manifest now, the field reported.
func TestAFollowerTakesAManifestWithAFieldOfAnotherType(t *testing.T) {
	root := newRoot(t)
	a := newRun(t, root, runA)
	sink := newMemSink()
	fl, pass, reported := stepFollower(t, root.Dir, sink)
	pass()
	require.NotNil(t, fl.runs[runA].p, "followed")
	require.NoError(t, os.WriteFile(filepath.Join(a.Dir, "manifest.json"), []byte(`{"runId":"`+runA+`","goal":5,`+
		`"status":"completed","createdAt":1790928000000}`), 0o644))
	pass()
	pass()
	require.Equal(t, []string{"goal 5 is not a string: taken as absent"},
		reasonsFor(*reported, "state/runs/"+runA+"/manifest.json"))
	require.Contains(t, mustImported(sink), "import:"+runA+":reconcile:run:completed")
}
