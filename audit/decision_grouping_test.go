package audit

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crewlog/crewlog/audit/audittest"
	"github.com/crewlog/crewlog/commands"
	"github.com/crewlog/crewlog/eventlog"
	"github.com/crewlog/crewlog/projections"
)

// TestExplainGroupsEventsWithoutACommandID: a command id is optional, and the events of a command sent without one
// are grouped into decisions by their stream and clock reading: an admission and the settlement that follows it at a
// later time are two decisions, and two refusals of the capability gate at the same time (each a lone
// delegate.rejected) are two as well. Merged, one decision was re-run against the other's events and called drift,
// and the second went unexplained.
func TestExplainGroupsEventsWithoutACommandID(t *testing.T) {
	const run = "team_20261001090000_0000000000000009"
	off := projections.DefaultConfig()
	off.NestingEnabled = false
	refused := &commands.DelegateRequest{RunID: run, TaskID: "t1", Prompt: "p"}
	steps := []struct {
		sameTime bool // decided at the clock reading of the step before
		decided
	}{
		{false, decided{audittest.Admin, &commands.RunCreate{RunID: run, Team: "crew", Cwd: "/srv"}}},
		{false, decided{audittest.Orchestrator, &commands.RunTransition{RunID: run, To: "running"}}},
		{false, decided{audittest.Orchestrator, &commands.TaskCreate{RunID: run, TaskID: "t1", Role: "explorer",
			Agent: "explorer", StepID: "s"}}},
		{false, decided{audittest.Orchestrator, &commands.TaskTransition{RunID: run, TaskID: "t1", To: "running"}}},
		{false, decided{audittest.Worker("t1"), &commands.DelegateRequest{RunID: run, TaskID: "t1", Prompt: "p"}}},
		{false, decided{audittest.Orchestrator, &commands.DelegateSettle{RunID: run, SubID: "gc-00000001",
			Outcome: commands.OutcomeOK}}},
		{false, decided{audittest.Admin, &commands.Configure{Config: off}}},
		{false, decided{audittest.Worker("t1"), refused}},
		{true, decided{audittest.Worker("t1"), refused}},
	}

	dir := filepath.Join(t.TempDir(), "store")
	l, err := eventlog.Open(dir, nil)
	require.NoError(t, err)
	w := audittest.NewWorld(l, audittest.Epoch.UnixNano())
	w.NoCommandIDs = true
	for _, st := range steps {
		w.Step = 1e9
		if st.sameTime {
			w.Step = 0
		}
		d, err := w.Do(st.actor, st.cmd)
		var rej *commands.RejectedError
		if err != nil && !errors.As(err, &rej) {
			require.NoError(t, err)
		}
		require.NotEmpty(t, d.Events, "%s records its decision", st.cmd.Kind())
		for _, ev := range d.Events {
			require.Empty(t, ev.CommandID)
		}
	}
	l = reopened(t, w, l, dir)

	res, err := Replay(l, ReplayOptions{Explain: true})
	require.NoError(t, err)
	var commandsExplained []string
	for _, d := range res.Decisions {
		require.False(t, d.Drift, "%s at %d..%d: %v", d.Command, d.Position, d.Last, d.Differences)
		commandsExplained = append(commandsExplained, d.Command)
	}
	require.Equal(t, []string{"delegate.request", "delegate.settle", "engine.configure",
		"delegate.request", "delegate.request"}, commandsExplained)
}
