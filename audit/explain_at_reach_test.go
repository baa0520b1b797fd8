package audit

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/events"
	"github.com/crewlog/crewlog/projections"
)

// TestExplainAtALongDecision: a decision may write more events than ExplainReach (a job's disconnect cancels every
// call in flight, up to the configured proxyMaxInFlight); explaining any of its events finds the whole decision, as
// the full replay does, and not a tail of it re-run on a state that already holds its head.
func TestExplainAtALongDecision(t *testing.T) {
	const run, calls = "team_20261001090000_00000000000000j2", ExplainReach + 36
	grant := grantOf("read")
	nonce := commands.SecretDigest("n")
	o := audittest.Orchestrator
	cfg := projections.DefaultConfig()
	cfg.ProxyMaxInFlight = calls
	steps := []decided{
		{audittest.Admin, &commands.Configure{Config: cfg}},
		{audittest.Admin, &commands.RunCreate{RunID: run, Team: "crew", Goal: "g", Cwd: "/srv"}},
		{o, &commands.RunTransition{RunID: run, To: "running"}},
		{o, &commands.TaskCreate{RunID: run, TaskID: "t1", Role: "engineer", Agent: "engineer", Title: "t", Cwd: "/srv", StepID: "s"}},
		{o, &commands.TaskTransition{RunID: run, TaskID: "t1", To: "running"}},
		{o, &commands.JobCreate{RunID: run, JobID: "J", TaskID: "t1", Tools: grant, NonceDigest: nonce}},
		{o, &commands.LeaseOpen{RunID: run, JobID: "J", Mode: events.LeaseStart, RootToolCallID: "c1"}},
	}
	for i := range calls {
		id := fmt.Sprintf("r%d", i)
		steps = append(steps, decided{audittest.Worker("t1"), &commands.ProxyRequest{RunID: run, TaskID: "t1", JobID: "J",
			RequestID: id, RequestIDChars: len(id), NonceDigest: nonce, Tool: "read", Args: json.RawMessage(`{}`)}})
	}
	steps = append(steps, decided{o, &commands.JobDisconnect{RunID: run, JobID: "J"}})
	w, l, dir := decidedLog(t, steps)
	l = reopened(t, w, l, dir)

	res, err := Replay(l, ReplayOptions{Explain: true})
	require.NoError(t, err)
	full := res.Decisions[len(res.Decisions)-1]
	require.Equal(t, "job.disconnect", full.Command)
	require.Equal(t, uint64(calls-1), full.Last-full.Position)
	for _, pos := range []uint64{full.Position, full.Position + ExplainReach, full.Last} {
		d, _, ok, err := ExplainAt(t.Context(), l, pos, nil)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, full, d, "explained at %d", pos)
	}
}
