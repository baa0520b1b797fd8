package commands

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// A worker's share of the bytes quota (quotaWorkerShare) is a limit it may reach: a message that brings what its task
// appended to exactly its share is taken, one that would pass it by a byte is refused quota-worker-bytes. The quota
// is set from the growth the message measures, so the bound is met to the byte.
func TestWorkerBytesShareIsReachable(t *testing.T) {
	w := newScenarioWorld(t)
	require.NoError(t, w.given(events.TypeRunCreated, "R", `{"team":"t","goal":"g","cwd":"/w"}`))
	require.NoError(t, w.given(events.TypeRunRunning, "R", `{}`))
	require.NoError(t, w.given(events.TypeTaskCreated, "R",
		`{"taskId":"a1","role":"executor","agent":"executor","title":"a","cwd":"/w","dependsOn":[]}`))
	require.NoError(t, w.given(events.TypeTaskStarted, "R", `{"taskId":"a1"}`))
	out, err := w.when(events.RoleWorker, "R", "a1", "msg.send",
		json.RawMessage(`{"to":"parent","body":"`+strings.Repeat("x", 1000)+`"}`))
	require.NoError(t, err)
	require.Nil(t, out.err)

	cmd, err := ParseCommand("msg.send", json.RawMessage(`{"to":"parent","body":"next"}`),
		Caller{Role: events.RoleWorker, RunID: "R", TaskID: "a1"})
	require.NoError(t, err)
	env := w.env(worker("a1"))
	d, err := Decide(w.s, cmd, env)
	require.NoError(t, err)
	_, used := w.s.WorkerAppended("R", "a1")
	share := used + growthOf("R", d.Events).Bytes // the worker's bytes once the message is appended
	for _, c := range []struct {
		name   string
		share  int64 // the worker's share of the bytes quota: half of it
		reason string
	}{
		{"at its share", share, ""},
		{"a byte past its share", share - 1, "quota-" + events.QuotaWorkerBytes},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := env
			env.Config = projections.DefaultConfig()
			env.Config.QuotaBytes, env.Config.QuotaWorkerShare = 2*c.share, 50
			_, err := Decide(w.s, cmd, env)
			if c.reason == "" {
				require.NoError(t, err)
				return
			}
			var rej *RejectedError
			require.ErrorAs(t, err, &rej)
			require.Equal(t, c.reason, rej.Reason)
		})
	}
}
