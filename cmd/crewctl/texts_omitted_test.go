package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit"
	"github.com/crewlog/crewlog/broker"
	"github.com/crewlog/crewlog/projections"
)

// TestOmissionsAppliedToTheRebuiltSide: the diff leaves out of the rebuilt side what crewd left out of each item, and
// only that: a task's texts, names and question id as crewd's WireTask leaves them out, and a dependsOn crewctl read
// page by page as query.tasks {taskId} writes it, an empty one as [] (a task may hold it as nil, which crewd sends
// whole as null).
func TestOmissionsAppliedToTheRebuiltSide(t *testing.T) {
	task := projections.Task{RunID: "R", TaskID: "T", Role: "r", Agent: "a", StepID: "s", Title: "t", Cwd: "/w",
		Waiting: &projections.Waiting{QuestionID: "q"}}
	for _, tc := range []struct {
		name string
		om   omission
		deps []string
		want string // the task's fields that matter, as JSON
	}{
		{"texts", omission{texts: true}, nil,
			`{"role":"r","agent":"a","stepId":"s","title":"","question":"q","dependsOn":null}`},
		{"names", omission{texts: true, names: true}, nil,
			`{"role":"","agent":"","stepId":"","title":"","question":"q","dependsOn":null}`},
		{"names and question", omission{texts: true, names: true, question: true}, nil,
			`{"role":"","agent":"","stepId":"","title":"","question":"","dependsOn":null}`},
		{"an empty dependsOn read", omission{dependsOnRead: true}, nil,
			`{"role":"r","agent":"a","stepId":"s","title":"t","question":"q","dependsOn":[]}`},
		{"a dependsOn read", omission{dependsOnRead: true}, []string{"D"},
			`{"role":"r","agent":"a","stepId":"s","title":"t","question":"q","dependsOn":["D"]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tk := task
			tk.DependsOn = tc.deps
			v := audit.View{Runs: []audit.RunView{{Run: projections.Run{RunID: "R"}, Tasks: []projections.Task{tk}}}}
			omittedTexts{{"task", "R", "T"}: tc.om}.apply(&v)
			got := v.Runs[0].Tasks[0]
			b, err := json.Marshal(map[string]any{"role": got.Role, "agent": got.Agent, "stepId": got.StepID,
				"title": got.Title, "question": got.Waiting.QuestionID, "dependsOn": got.DependsOn})
			require.NoError(t, err)
			require.JSONEq(t, tc.want, string(b))
		})
	}
}

// TestAQuestionLeftOutIsNoted: a task crewd sent with its names and an empty question id had the id left out (a
// question id is never empty), and only then; the rebuilt side leaves it out too.
func TestAQuestionLeftOutIsNoted(t *testing.T) {
	for _, tc := range []struct {
		name     string
		names    bool
		question string
		want     omission
	}{
		{"question left out", true, "", omission{names: true, question: true}},
		{"question kept", true, "q", omission{names: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := broker.WireTask{Task: projections.Task{RunID: "R", TaskID: "T",
				Waiting: &projections.Waiting{QuestionID: tc.question}}}
			w.NamesOmitted = tc.names
			o := omittedTexts{}
			o.note(runViews{Tasks: []broker.WireTask{w}})
			require.Equal(t, tc.want, o[omittedItem{"task", "R", "T"}])
		})
	}
}
