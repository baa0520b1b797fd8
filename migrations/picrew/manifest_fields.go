package picrew

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
)

// mistypedField is a field of a manifest or a task record of another JSON type than the kind pi-crew writes, as
// written (clipped); takenAs says what it is taken as when not absent (looseAs).
type mistypedField struct {
	name, written, kind, takenAs string
}

// reason is what the report of the field says, of a manifest and of a task record alike.
func (f mistypedField) reason() string {
	return fmt.Sprintf("%s %s is not a %s: taken as %s", f.name, f.written, f.kind, cmp.Or(f.takenAs, "absent"))
}

// decodeManifest decodes manifest b into m as encoding/json does, but for a text field, budgetWarning, budgetAbort or
// budgetUnlimited of another JSON type, which is taken as absent and returned in mistyped, for its caller to report.
// NB: a run's workers rewrite the manifest, and one such field failed the whole decode: the one-shot import did not
// import the run, and a follower kept the manifest read before (budgetTotal and the times never fail: flexInt,
// flexTime). The fields are decoded in place as encoding/json decodes them (the names it matches, the last value
// standing, a null keeping the one before), a mistyped value costing the field only.
func decodeManifest(b []byte, m *manifest) (mistyped []mistypedField, err error) {
	text := func(name string, v *string) looseField[string] { return loose(&mistyped, name, "string", v) }
	fraction := func(name string, v **float64) looseField[*float64] {
		return loose(&mistyped, name, "finite number", v)
	}
	err = decodeLoose(b, m, &struct {
		*manifest
		RunID           looseField[string]   `json:"runId"`
		Team            looseField[string]   `json:"team"`
		Workflow        looseField[string]   `json:"workflow"`
		Goal            looseField[string]   `json:"goal"`
		Status          looseField[string]   `json:"status"`
		Cwd             looseField[string]   `json:"cwd"`
		ArtifactsRoot   looseField[string]   `json:"artifactsRoot"`
		BudgetWarning   looseField[*float64] `json:"budgetWarning"`
		BudgetAbort     looseField[*float64] `json:"budgetAbort"`
		BudgetUnlimited looseField[bool]     `json:"budgetUnlimited"`
	}{
		manifest: m, RunID: text("runId", &m.RunID), Team: text("team", &m.Team),
		Workflow: text("workflow", &m.Workflow), Goal: text("goal", &m.Goal), Status: text("status", &m.Status),
		Cwd: text("cwd", &m.Cwd), ArtifactsRoot: text("artifactsRoot", &m.ArtifactsRoot),
		BudgetWarning:   fraction("budgetWarning", &m.BudgetWarning),
		BudgetAbort:     fraction("budgetAbort", &m.BudgetAbort),
		BudgetUnlimited: loose(&mistyped, "budgetUnlimited", "boolean", &m.BudgetUnlimited),
	})
	return mistyped, err
}

// decodeLoose decodes b into fields, a struct embedding a pointer to v and shadowing its fields by looseFields of
// the same JSON names, or, b no object, into v as encoding/json does (null, or the error of a value that is no
// object). NB: the looseFields are of depth 0, so encoding/json decodes each name they take into them, not into v's
// fields they decode into, which they hide.
func decodeLoose(b []byte, v, fields any) error {
	if !bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")) {
		return json.Unmarshal(b, v)
	}
	return json.Unmarshal(b, fields)
}

// loose is the looseField of the field name of the kind pi-crew writes, decoded into v, reported in mistyped.
func loose[T any](mistyped *[]mistypedField, name, kind string, v *T) looseField[T] {
	return looseField[T]{mistyped: mistyped, name: name, kind: kind, v: v}
}

// looseAs is loose, but for a value of another JSON type, taken as as, which takenAs words for its report: a field
// whose presence alone means something (a task's stepId).
func looseAs[T any](mistyped *[]mistypedField, name, kind string, v *T, as T, takenAs string) looseField[T] {
	return looseField[T]{mistyped: mistyped, name: name, kind: kind, v: v, as: as, takenAs: takenAs}
}

// looseField decodes a field into v, a value of another JSON type (kind names the one pi-crew writes) taken
// as absent (as, when takenAs words it, a null included) and kept in mistyped under name, until a later value of the
// field other than null decodes.
type looseField[T any] struct {
	mistyped            *[]mistypedField
	name, kind, takenAs string
	v                   *T
	as                  T
}

func (f looseField[T]) UnmarshalJSON(b []byte) error {
	// NB: a null is there too for a field whose presence alone means something (takenAs: a task's stepId, which
	// pi-crew tests against undefined alone), where encoding/json would empty the pointer as if it were absent.
	if string(b) == "null" && f.takenAs != "" || json.Unmarshal(b, f.v) != nil {
		*f.v = f.as
		*f.mistyped = append(f.drop(), mistypedField{f.name, clip(string(b)), f.kind, f.takenAs})
	} else if string(b) != "null" {
		*f.mistyped = f.drop()
	}
	return nil
}

// drop is mistyped without the field.
func (f looseField[T]) drop() []mistypedField {
	return slices.DeleteFunc(*f.mistyped, func(w mistypedField) bool { return w.name == f.name })
}
