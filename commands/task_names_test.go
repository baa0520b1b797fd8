package commands

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTaskCreateRefusesARecipientName: msg.send reads "parent" as the run inbox, "all" as every workflow task and
// "group" as a worker's live siblings before it looks for a task of that name. A task created under one of those
// names could never be sent a message of its own: the orchestrator's message to task "parent" went to the run inbox,
// the one it reads itself, its message to task "all" to every task of the run, and a worker's to "group" to all its
// siblings, while a worker's message to ["parent", "group"] left task "parent" out as a copy already sent. Like
// "orchestrator", these names are refused as task ids.
func TestTaskCreateRefusesARecipientName(t *testing.T) {
	for _, id := range []string{ToParent, ToAll, ToGroup, "orchestrator"} {
		t.Run(id, func(t *testing.T) {
			l := fxRunning(t, 0)
			dec, err := fxDecide(t, l.s, &TaskCreate{RunID: fxRun, TaskID: id, Role: "executor",
				Agent: "executor", Cwd: "/w"})
			fxRejected(t, dec, err, CodeBadParams, "invalid-params", "task.create: taskId")
		})
	}
	l := fxRunning(t, 0)
	dec, err := fxDecide(t, l.s, &TaskCreate{RunID: fxRun, TaskID: "parents", Role: "executor",
		Agent: "executor", Cwd: "/w"})
	require.NoError(t, err, "only the names themselves are taken")
	require.Len(t, dec.Events, 1)
}
