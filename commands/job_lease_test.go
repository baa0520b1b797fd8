package commands

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
)

// TestLeaseOpenContinueNeedsTheGrant: a continue without tools is a
// malformed request, refused bad-params with nothing recorded and the job
// still paused, so the manager can send it again with its grant; it used to
// be revalidated as an empty grant, which hard-stopped the job for a
// missing param. An empty list is a grant, another than the job's: the job
// is hard-stopped (T4).
func TestLeaseOpenContinueNeedsTheGrant(t *testing.T) {
	w := workerEndWorld(t, true)
	mustDo(t, w, events.RoleOrchestrator, "", "job.transition", `{"jobId":"J","to":"paused"}`)
	for _, params := range []string{
		`{"jobId":"J","mode":"continue","rootToolCallId":"call-2"}`,
		`{"jobId":"J","mode":"continue","rootToolCallId":"call-2","tools":null}`,
	} {
		out, err := w.when(events.RoleOrchestrator, "R", "", "lease.open", json.RawMessage(params))
		require.NoError(t, err)
		require.NotNil(t, out.err, params)
		require.Equal(t, CodeBadParams, out.err.Code, params)
		require.Contains(t, out.err.Message, "tools", params)
		require.Empty(t, out.events, "nothing is recorded")
		j, _ := w.s.JobHeader("R", "J")
		require.Equal(t, events.JobPaused, j.Status, "the job is not stopped")
	}
	mustDo(t, w, events.RoleOrchestrator, "", "lease.open",
		`{"jobId":"J","mode":"continue","rootToolCallId":"call-2","tools":`+string(jobGrant)+`}`)
	j, _ := w.s.JobHeader("R", "J")
	require.Equal(t, events.JobRunning, j.Status)

	t.Run("an empty grant", func(t *testing.T) {
		w := workerEndWorld(t, true)
		mustDo(t, w, events.RoleOrchestrator, "", "job.transition", `{"jobId":"J","to":"paused"}`)
		out, err := w.when(events.RoleOrchestrator, "R", "", "lease.open",
			json.RawMessage(`{"jobId":"J","mode":"continue","rootToolCallId":"call-2","tools":[]}`))
		require.NoError(t, err)
		require.NotNil(t, out.err)
		require.Equal(t, events.ProxyReasonRevalidationFailed, out.err.Reason)
		j, _ := w.s.JobHeader("R", "J")
		require.Equal(t, events.JobHardStopped, j.Status)
	})
}
