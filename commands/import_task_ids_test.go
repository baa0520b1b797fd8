package commands

import (
	"context"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// TestImportedTaskIDsAreOnesTaskCreateTakes: import.append refuses a task.created named by a word no task may be
// named (the recipient names msg.send reads as the run inbox, every workflow task and a worker's live siblings, and
// the orchestrator's credential key), and an empty taskId wherever a payload names a task (the run inbox's mailbox
// key), naming the id; nothing refused is recorded, and the same payload with a task's id is taken.
func TestImportedTaskIDsAreOnesTaskCreateTakes(t *testing.T) {
	f := openEngine(t, vfs.NewMem(), newTestClock(), nil)
	r, err := f.eng.Submit(context.Background(), importOf("R", "import:R:run", events.TypeRunCreated,
		&events.RunCreated{Team: "t", Goal: "g", Cwd: "/w"}))
	require.NoError(t, err)
	require.Nil(t, r.Rejected)
	created := func(id string) *events.TaskCreated {
		return &events.TaskCreated{TaskID: id, Role: "executor", Kind: events.TaskKindWorkflow}
	}
	for name, tc := range map[string]struct {
		typ     string
		bad, ok any
		want    string
	}{
		"parent": {events.TypeTaskCreated, created(ToParent), created("A"), `taskId "parent"`},
		"all":    {events.TypeTaskCreated, created(ToAll), created("B"), `taskId "all"`},
		"group":  {events.TypeTaskCreated, created(ToGroup), created("C"), `taskId "group"`},
		"orchestrator": {events.TypeTaskCreated, created(events.OrchestratorKey), created("D"),
			`taskId "orchestrator"`},
		"empty created": {events.TypeTaskCreated, created(""), created("E"), `taskId must not be empty`},
		"empty started": {events.TypeTaskStarted, &events.TaskStarted{}, &events.TaskStarted{TaskID: "E"},
			`taskId must not be empty`},
		"empty steer": {events.TypeSteerPushed, &events.SteerPushed{MessageID: "m"}, nil,
			`taskId must not be empty`},
		"empty by value": {events.TypeTaskStarted, events.TaskStarted{}, nil, `taskId must not be empty`},
	} {
		head := f.eng.Head()
		r, err := f.eng.Submit(context.Background(), importOf("R", "import:R:bad:"+name, tc.typ, tc.bad))
		require.NoError(t, err, name)
		require.NotNil(t, r.Rejected, name)
		require.Equal(t, CodeBadParams, r.Rejected.Code, name)
		require.Contains(t, r.Rejected.Message, tc.typ+": "+tc.want, name)
		require.Equal(t, head, f.eng.Head(), "%s: nothing recorded", name)
		if tc.ok == nil {
			continue
		}
		r, err = f.eng.Submit(context.Background(), importOf("R", "import:R:ok:"+name, tc.typ, tc.ok))
		require.NoError(t, err, name)
		require.Nil(t, r.Rejected, name)
	}
}
