package commands

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// TestJobRefusalsOutsideTheRules: what the dispatcher's rules refuse is recorded (job.rejected, proxy.rejected),
// but a message no rule is asked about — malformed, naming a job the run does not hold or another task's job, or
// for a run that ended — is refused with nothing recorded: there is no job, or no job of the caller's, to record
// it on, and nothing of the job changes.
func TestJobRefusalsOutsideTheRules(t *testing.T) {
	for _, tc := range []struct {
		name           string
		role, taskID   string
		method, params string
		before         string // a run.transition before, if any
		code, reason   string
	}{
		{name: "another task's job", role: events.RoleWorker, taskID: "X", method: "proxy.request",
			params: `{"jobId":"J","requestId":"r1","nonce":"secret-1","tool":"read"}`,
			code:   CodeForbidden, reason: "forbidden"},
		{name: "another task's cancel", role: events.RoleWorker, taskID: "X", method: "proxy.cancel",
			params: `{"jobId":"J","requestId":"r1","nonce":"secret-1"}`, code: CodeForbidden, reason: "forbidden"},
		{name: "no such job", role: events.RoleWorker, taskID: "W", method: "proxy.request",
			params: `{"jobId":"K","requestId":"r1","nonce":"secret-1","tool":"read"}`,
			code:   CodeBadParams, reason: "no-job"},
		{name: "no such job to clear", role: events.RoleOrchestrator, method: "lease.clear", params: `{"jobId":"K"}`,
			code: CodeBadParams, reason: "no-job"},
		{name: "a mode of no rule", role: events.RoleOrchestrator, method: "lease.open",
			params: `{"jobId":"J","mode":"resume","rootToolCallId":"call-2"}`, code: CodeBadParams},
		{name: "the run ended", role: events.RoleOrchestrator, method: "lease.open",
			params: `{"jobId":"J","mode":"start","rootToolCallId":"call-2"}`, before: `{"to":"cancelled"}`,
			code: CodeForbidden, reason: "run-terminal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := runWorld(t)
			require.NoError(t, w.given(events.TypeTaskCreated, "R",
				`{"taskId":"X","role":"executor","agent":"executor","title":"x","cwd":"/w","dependsOn":[]}`))
			require.NoError(t, w.given(events.TypeTaskStarted, "R", `{"taskId":"X"}`))
			mustDo(t, w, events.RoleOrchestrator, "", "job.create", `{"jobId":"J","taskId":"W","tools":`+grantOf(2)+`}`)
			if tc.before != "" {
				mustDo(t, w, events.RoleOrchestrator, "", "run.transition", tc.before)
			}
			before, _ := w.s.JobHeader("R", "J")
			out, err := w.when(tc.role, "R", tc.taskID, tc.method, json.RawMessage(tc.params))
			require.NoError(t, err)
			require.NotNil(t, out.err)
			require.Equal(t, tc.code, out.err.Code)
			if tc.reason != "" {
				require.Equal(t, tc.reason, out.err.Reason)
			}
			require.Empty(t, out.events, "nothing recorded")
			after, _ := w.s.JobHeader("R", "J")
			require.Equal(t, before, after)
		})
	}
}
