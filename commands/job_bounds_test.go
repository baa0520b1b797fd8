package commands

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// grantOf is a grant of n distinct tools.
func grantOf(n int) string {
	tools := make([]any, n)
	for i := range tools {
		tools[i] = jobTool(fmt.Sprintf("t%d", i), i%2 == 0, "tool")
	}
	b, err := json.Marshal(tools)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestJobCreateBounds: a run holds one live job at a time and at most 64 jobs in all, and a grant at most 256 tools;
// past each, job.create is refused policy-denied with the rule's reason, recorded (job.rejected) with what the rule
// saw, and no job is created.
func TestJobCreateBounds(t *testing.T) {
	for _, tc := range []struct {
		name string
		// before makes the run's jobs before the one created; tools is the created job's grant.
		before func(t *testing.T, w *scenarioWorld)
		tools  string
		want   events.JobRejected // Message aside; a zero Reason: created
	}{
		{name: "a live job", before: func(t *testing.T, w *scenarioWorld) {
			mustDo(t, w, events.RoleOrchestrator, "", "job.create", `{"jobId":"J","taskId":"W","tools":`+grantOf(1)+`}`)
		}, tools: grantOf(1), want: events.JobRejected{Op: "create", Reason: "job-active", Live: "J"}},
		{name: "the live job ended", before: func(t *testing.T, w *scenarioWorld) {
			mustDo(t, w, events.RoleOrchestrator, "", "job.create", `{"jobId":"J","taskId":"W","tools":`+grantOf(1)+`}`)
			mustDo(t, w, events.RoleOrchestrator, "", "job.transition", `{"jobId":"J","to":"cancelled"}`)
		}, tools: grantOf(1)},
		{name: "63 jobs", before: func(t *testing.T, w *scenarioWorld) { endedJobs(t, w, 63) }, tools: grantOf(1)},
		{name: "64 jobs", before: func(t *testing.T, w *scenarioWorld) { endedJobs(t, w, 64) }, tools: grantOf(1),
			want: events.JobRejected{Op: "create", Reason: "job-limit", Limit: 64}},
		{name: "256 tools", before: func(*testing.T, *scenarioWorld) {}, tools: grantOf(256)},
		{name: "257 tools", before: func(*testing.T, *scenarioWorld) {}, tools: grantOf(257),
			want: events.JobRejected{Op: "create", Reason: reasonManifestInvalid}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := runWorld(t)
			tc.before(t, w)
			out, err := w.when(events.RoleOrchestrator, "R", "", "job.create",
				json.RawMessage(`{"jobId":"K","taskId":"W","tools":`+tc.tools+`}`))
			require.NoError(t, err)
			_, exists := w.s.JobHeader("R", "K")
			if tc.want.Reason == "" {
				require.Nil(t, out.err)
				require.True(t, exists)
				return
			}
			require.NotNil(t, out.err)
			require.Equal(t, CodePolicyDenied, out.err.Code)
			require.Equal(t, tc.want.Reason, out.err.Reason)
			require.Len(t, out.events, 1)
			p, ok := out.events[0].Payload.(*events.JobRejected)
			require.True(t, ok, "the refusal is recorded")
			tc.want.JobID, tc.want.Message = "K", out.err.Message
			require.Equal(t, tc.want, *p)
			require.False(t, exists)
		})
	}
}

// endedJobs creates n jobs of task W in run R, each cancelled before the next (one live job at a time).
func endedJobs(t *testing.T, w *scenarioWorld, n int) {
	t.Helper()
	for i := range n {
		id := fmt.Sprintf("E%d", i)
		mustDo(t, w, events.RoleOrchestrator, "", "job.create", `{"jobId":"`+id+`","taskId":"W","tools":`+grantOf(1)+`}`)
		mustDo(t, w, events.RoleOrchestrator, "", "job.transition", `{"jobId":"`+id+`","to":"cancelled"}`)
	}
}

// TestJobIDsAreBounded: a job id is 1..128 chars and a lease's root tool call id 1..512 (chars, not bytes); one
// longer is refused bad-params with nothing recorded, and nothing is created or opened.
func TestJobIDsAreBounded(t *testing.T) {
	createJ := func(t *testing.T, w *scenarioWorld) {
		mustDo(t, w, events.RoleOrchestrator, "", "job.create", `{"jobId":"J","taskId":"W","tools":`+grantOf(1)+`}`)
	}
	for _, tc := range []struct {
		name   string
		before func(t *testing.T, w *scenarioWorld)
		method string
		params func(id string) string
		char   string
		max    int
		made   func(w *scenarioWorld) bool
	}{
		{"job id", func(*testing.T, *scenarioWorld) {}, "job.create", func(id string) string {
			return `{"jobId":"` + id + `","taskId":"W","tools":` + grantOf(1) + `}`
		}, "j", 128, func(w *scenarioWorld) bool { n, _ := w.s.JobCount("R"); return n == 1 }},
		{"root", createJ, "lease.open", func(id string) string {
			return `{"jobId":"J","mode":"start","rootToolCallId":"` + id + `"}`
		}, "r", 512, func(w *scenarioWorld) bool { j, _ := w.s.JobHeader("R", "J"); return j.LeaseActive }},
		{"root of two-byte chars", createJ, "lease.open", func(id string) string {
			return `{"jobId":"J","mode":"start","rootToolCallId":"` + id + `"}`
		}, "é", 512, func(w *scenarioWorld) bool { j, _ := w.s.JobHeader("R", "J"); return j.LeaseActive }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := runWorld(t)
			tc.before(t, w)
			out, err := w.when(events.RoleOrchestrator, "R", "", tc.method,
				json.RawMessage(tc.params(strings.Repeat(tc.char, tc.max+1))))
			require.NoError(t, err)
			require.NotNil(t, out.err, "one char past the bound")
			require.Equal(t, CodeBadParams, out.err.Code)
			require.Empty(t, out.events)
			require.False(t, tc.made(w))

			mustDo(t, w, events.RoleOrchestrator, "", tc.method, tc.params(strings.Repeat(tc.char, tc.max)))
			require.True(t, tc.made(w), "at the bound")
		})
	}
}
