package picrew

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// TestATaskFieldOfAnotherTypeCostsTheFieldOnly: a field of a task record in tasks.json of another JSON type than
// pi-crew writes (a status that is a number, a title that is an object, a usage counter that is a string) made the
// whole record fail to decode: the task was left out, its delegations' shadow links and every event line naming it
// with it. Such a field is taken as absent and reported as written now, and the rest of the task is read (a stepId
// is taken as empty: TestAMistypedStepIDKeepsTheTaskAWorkflowTask).
func TestATaskFieldOfAnotherTypeCostsTheFieldOnly(t *testing.T) {
	texts := []string{"5", "true", `{"a":1}`, `["x"]`}
	for _, tc := range []struct {
		field, kind string
		written     []string
	}{
		{"runId", "string", texts},
		{"role", "string", texts},
		{"agent", "string", texts},
		{"title", "string", texts},
		{"status", "string", texts},
		{"cwd", "string", texts},
		{"error", "string", texts},
		{"failureCause", "string", texts},
		{"model", "string", texts},
		{"dependsOn", "list of strings", []string{`"b"`, "5", `{"a":1}`, "[1]", `["b",{}]`}},
		{"depth", "whole number", []string{`"1"`, "1.5", "true", `{"a":1}`, "[1]", "1e400"}},
		{"allocation", "record of whole token counts", []string{`"x"`, "5", "[1]",
			`{"tokensGranted":"5"}`, `{"tokensSpent":1.5}`}},
		{"waiting", "question record", []string{`"x"`, "5", "[1]", `{"questionId":5}`, `{"options":"a"}`}},
		{"usage", "record of counts", []string{`"x"`, "5", "[1]", `{"input":"5"}`, `{"output":1.5}`,
			`{"cacheRead":true}`, `{"cacheWrite":[1]}`, `{"turns":{}}`, `{"cost":"0.1"}`}},
	} {
		for _, written := range tc.written {
			name := tc.field + " " + written
			s := &source{root: t.TempDir()}
			tasks, err := s.parseTasks(runA, "tasks.json", []byte(`[{"id":"a","runId":"`+runA+`","stepId":"s",`+
				`"role":"r","agent":"g","title":"t","status":"running","cwd":"/c","dependsOn":["b"],"error":"e",`+
				`"failureCause":"f","model":"m","depth":1,"allocation":{"tokensGranted":5,"tokensSpent":1},`+
				`"waiting":{"questionId":"q","options":["o"]},"usage":{"input":1,"output":2,"turns":1},`+
				`"`+tc.field+`":`+written+`},{"id":"b","runId":"`+runA+`","stepId":"s2","title":"b"}]`))
			require.NoError(t, err, name)
			require.Equal(t, []string{"task a: " + tc.field + " " + written + " is not a " + tc.kind +
				": taken as absent"}, reasonsFor(s.skipped, "tasks.json"), name)
			var want []task
			require.NoError(t, json.Unmarshal([]byte(`[{"id":"a","runId":"`+runA+`","stepId":"s","role":"r",`+
				`"agent":"g","title":"t","status":"running","cwd":"/c","dependsOn":["b"],"error":"e",`+
				`"failureCause":"f","model":"m","depth":1,"allocation":{"tokensGranted":5,"tokensSpent":1},`+
				`"waiting":{"questionId":"q","options":["o"]},"usage":{"input":1,"output":2,"turns":1}},`+
				`{"id":"b","runId":"`+runA+`","stepId":"s2","title":"b"}]`), &want))
			for i := range reflect.TypeFor[task]().NumField() {
				if jsonName(reflect.TypeFor[task]().Field(i)) == tc.field {
					reflect.ValueOf(&want[0]).Elem().Field(i).SetZero() // the field taken as absent
				}
			}
			require.Equal(t, want, tasks, name)
		}
	}
}

// TestATaskRecordThatIsNoObjectOrHasNoUsableIDIsLeftOut: a record that is no object, or whose id is of another type
// (no usable id), is still left out, the other tasks read.
func TestATaskRecordThatIsNoObjectOrHasNoUsableIDIsLeftOut(t *testing.T) {
	for record, reasons := range map[string][]string{
		`5`:          {"task 0 does not decode: left out: json: cannot unmarshal number into Go value of type picrew.task"},
		`"a"`:        {"task 0 does not decode: left out: json: cannot unmarshal string into Go value of type picrew.task"},
		`[1]`:        {"task 0 does not decode: left out: json: cannot unmarshal array into Go value of type picrew.task"},
		`{"id":5}`:   {`task 0 has an unusable id ""`},
		`{"id":[1]}`: {`task 0 has an unusable id ""`},
	} {
		s := &source{root: t.TempDir()}
		tasks, err := s.parseTasks(runA, "tasks.json", []byte(`[`+record+`,{"id":"b","stepId":"s"}]`))
		require.NoError(t, err, record)
		require.Len(t, tasks, 1, record)
		require.Equal(t, "b", tasks[0].ID, record)
		require.Equal(t, reasons, reasonsFor(s.skipped, "tasks.json"), record)
	}
}

// TestATaskOfFieldsOfTheirTypesDecodesAsBefore: a task record whose fields are of the types pi-crew writes decodes
// as encoding/json decoded it, with no report.
func TestATaskOfFieldsOfTheirTypesDecodesAsBefore(t *testing.T) {
	for _, b := range []string{
		`{"id":"a"}`,
		`{"id":"a","runId":"` + runA + `","stepId":"s","role":"r","agent":"g","title":"t","status":"done",` +
			`"cwd":"/c","dependsOn":["b","c"],"startedAt":"2026-10-02T08:00:00.000Z","finishedAt":1760000000000,` +
			`"error":"e","failureCause":"f","model":"m","depth":2,"allocation":{"tokensGranted":9,"tokensSpent":3},` +
			`"waiting":{"questionId":"q","askedAt":1760000000000,"options":["x"]},` +
			`"usage":{"input":1,"output":2,"cacheRead":3,"cacheWrite":4,"cost":0.5,"turns":6},"other":[1]}`,
		`{"id":"a","title":null,"usage":null,"TITLE":"x","Status":"y","title":"z","depth":null}`,
	} {
		var want task
		require.NoError(t, json.Unmarshal([]byte(b), &want), b)
		s := &source{root: t.TempDir()}
		tasks, err := s.parseTasks(runA, "tasks.json", []byte(`[`+b+`]`))
		require.NoError(t, err, b)
		require.Equal(t, []task{want}, tasks, b)
		require.Empty(t, s.skipped, b)
	}
}

// TestATaskFieldNamedTwiceIsTheLastOne: a field a task record names twice is decoded as encoding/json decodes it (the
// last value stands, a null keeps the one before but for a stepId's, which it takes as empty), one of another type
// costing itself only when it is the last.
func TestATaskFieldNamedTwiceIsTheLastOne(t *testing.T) {
	for _, tc := range []struct {
		fields  string
		want    task
		reasons []string
	}{
		{`"title":5,"title":"z"`, task{ID: "a", Title: "z"}, nil},
		{`"title":"z","title":5`, task{ID: "a"}, []string{"task a: title 5 is not a string: taken as absent"}},
		{`"title":"z","title":null`, task{ID: "a", Title: "z"}, nil},
		{`"title":5,"TITLE":null`, task{ID: "a"}, []string{"task a: title 5 is not a string: taken as absent"}},
		{`"usage":{"input":1},"usage":null`, task{ID: "a"}, nil},
		{`"usage":{"input":"1"},"usage":{"input":2}`, task{ID: "a", Usage: &taskUsage{Input: 2}}, nil},
		{`"stepId":5,"stepId":null`, task{ID: "a", StepID: new(string)}, []string{"task a: stepId null is not a " +
			"string: taken as empty, the task a workflow task (a shadow has none)"}},
		{`"stepId":null,"stepId":"s"`, task{ID: "a", StepID: new("s")}, nil},
		{`"stepId":null,"stepId":5`, task{ID: "a", StepID: new(string)}, []string{"task a: stepId 5 is not a string: " +
			"taken as empty, the task a workflow task (a shadow has none)"}},
	} {
		s := &source{root: t.TempDir()}
		tasks, err := s.parseTasks(runA, "tasks.json", []byte(`[{"id":"a",`+tc.fields+`}]`))
		require.NoError(t, err, tc.fields)
		require.Equal(t, []task{tc.want}, tasks, tc.fields)
		require.Equal(t, tc.reasons, reasonsFor(s.skipped, "tasks.json"), tc.fields)
	}
}

// TestAMistypedStepIDKeepsTheTaskAWorkflowTask: pi-crew tells a delegation's shadow task by its stepId alone, one
// that is absent (BR-09: isDelegateShadowTask is stepId === undefined), so a stepId of another JSON type is there,
// and its task a workflow task, as pi-crew's scheduler takes it. Taken as absent, it made the workflow task a
// shadow: its task.created left out (a shadow is created by its delegation), and a delegation's admission under its
// id taken for its own. It is taken as empty now, and reported, and so is a null one (pi-crew's test is against
// undefined alone: a null stepId is there); a task without one is a shadow still.
func TestAMistypedStepIDKeepsTheTaskAWorkflowTask(t *testing.T) {
	for _, tc := range []struct {
		stepID string
		shadow bool
		reason string
	}{
		{`5`, false, "task a: stepId 5 is not a string: taken as empty, the task a workflow task (a shadow has none)"},
		{`true`, false, "task a: stepId true is not a string: taken as empty, the task a workflow task (a shadow " +
			"has none)"},
		{`{"a":1}`, false, `task a: stepId {"a":1} is not a string: taken as empty, the task a workflow task (a ` +
			`shadow has none)`},
		{`["s"]`, false, `task a: stepId ["s"] is not a string: taken as empty, the task a workflow task (a shadow ` +
			`has none)`},
		{`"s"`, false, ""},
		{`""`, false, ""},
		{`null`, false, "task a: stepId null is not a string: taken as empty, the task a workflow task (a shadow " +
			"has none)"},
		{``, true, ""},
	} {
		field := ""
		if tc.stepID != "" {
			field = `,"stepId":` + tc.stepID
		}
		s := &source{root: t.TempDir()}
		tasks, err := s.parseTasks(runA, "tasks.json", []byte(`[{"id":"a","agent":"delegate"`+field+`}]`))
		require.NoError(t, err, tc.stepID)
		require.Len(t, tasks, 1, tc.stepID)
		require.Equal(t, tc.shadow, tasks[0].shadow(), "stepId %s", tc.stepID)
		var reasons []string
		if tc.reason != "" {
			reasons = []string{tc.reason}
		}
		require.Equal(t, reasons, reasonsFor(s.skipped, "tasks.json"), tc.stepID)
	}
}

// TestAnImportedTaskOfAMistypedStepIDIsAWorkflowTask: the one-shot import records a task of tasks.json whose stepId
// is of another JSON type as the workflow task it is (task.created, kind workflow), where it left it out as a shadow
// no delegation admitted, its task.started naming no task of the run.
func TestAnImportedTaskOfAMistypedStepIDIsAWorkflowTask(t *testing.T) {
	l := openFuzzStore(t)
	defer l.Close()
	files := slotRunFiles(runA)
	files["state/runs/"+runA+"/tasks.json"] = `[{"id":"01_exec","stepId":7,"role":"executor","status":"running"}]`
	reports := importFiles(t, l, files, false, "stepId")
	require.Equal(t, []string{"state/runs/" + runA + "/tasks.json: task 01_exec: stepId 7 is not a string: taken as " +
		"empty, the task a workflow task (a shadow has none)"}, reports)
	task, ok := stateOf(t, l).Task(runA, "01_exec")
	require.True(t, ok, "the task is recorded")
	require.Equal(t, events.TaskKindWorkflow, task.Kind)
	require.Equal(t, "running", string(task.Status))
}
