package events

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// An actor is named role/task, or by its role alone when the task adds nothing; an actor with no role is "-".
func TestActorString(t *testing.T) {
	tests := []struct {
		actor Actor
		want  string
	}{
		{Actor{Role: RoleAdmin}, "admin"},
		{Actor{Role: RoleOrchestrator}, "orchestrator"},
		{Actor{Role: RoleWorker, TaskID: "02_exec"}, "worker/02_exec"},
		{Actor{Role: RoleOrchestrator, TaskID: RoleOrchestrator}, "orchestrator"},
		{Actor{Role: RoleEngine}, "engine"},
		{Actor{}, "-"},
		{Actor{TaskID: "02_exec"}, "/02_exec"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			require.Equal(t, tc.want, tc.actor.String())
		})
	}
}
